//! Text form parser (owned by the verifier/filetest work).
