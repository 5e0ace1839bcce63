//! Host memory of a caller's array, read and written through the kernel's
//! `process_vm_readv` / `process_vm_writev` on this process: an address
//! range that is not mapped (a foreign `__array_interface__` with a bogus
//! pointer) or not writable makes the call fail with `EFAULT`, raised as a
//! Python `ValueError`, instead of a segfault that takes the interpreter
//! down. (A range that is mapped but belongs to something else cannot be
//! told apart: the array interface is trusted that far.) Where the system
//! refuses the calls (`ENOSYS`, `EPERM`), plain memory copies are used.

use std::io;

/// iovecs per system call (the kernel's `IOV_MAX`).
const IOV_MAX: usize = 1024;

fn vm(write: bool, local: &[libc::iovec], remote: &[libc::iovec]) -> io::Result<usize> {
    let call = if write {
        libc::process_vm_writev
    } else {
        libc::process_vm_readv
    };
    // SAFETY: the local iovecs point into buffers the caller owns for the
    // call; the remote ones are only ever touched by the kernel, which
    // checks them (EFAULT).
    let n = unsafe {
        call(
            libc::getpid(),
            local.as_ptr(),
            local.len() as libc::c_ulong,
            remote.as_ptr(),
            remote.len() as libc::c_ulong,
            0,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

fn unsupported(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EPERM))
}

/// `len` bytes at address `ptr` of this process, or why they cannot be read.
pub fn read(ptr: u64, len: usize) -> Result<Vec<u8>, String> {
    let mut out = vec![0u8; len];
    let mut done = 0;
    while done < len {
        let local = [libc::iovec {
            iov_base: out[done..].as_mut_ptr().cast(),
            iov_len: len - done,
        }];
        let remote = [libc::iovec {
            iov_base: (ptr as usize + done) as *mut libc::c_void,
            iov_len: len - done,
        }];
        match vm(false, &local, &remote) {
            Ok(0) => return Err(format!("the {len} bytes at {ptr:#x} cannot be read")),
            Ok(n) => done += n,
            Err(e) if unsupported(&e) => {
                // SAFETY: the array interface vouches for the range; no
                // checked route is available here.
                let src = unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
                out.copy_from_slice(src);
                return Ok(out);
            }
            Err(e) => {
                return Err(format!("the {len} bytes at {ptr:#x} cannot be read ({e})"));
            }
        }
    }
    Ok(out)
}

/// Write `runs` (`(offset, bytes)` from address `base`) into this process's
/// memory, or say why not (a range not mapped, or read-only).
pub fn write(base: u64, runs: &[(usize, &[u8])]) -> Result<(), String> {
    for chunk in runs.chunks(IOV_MAX) {
        let local: Vec<libc::iovec> = chunk
            .iter()
            .map(|(_, b)| libc::iovec {
                iov_base: b.as_ptr() as *mut libc::c_void,
                iov_len: b.len(),
            })
            .collect();
        let remote: Vec<libc::iovec> = chunk
            .iter()
            .map(|&(o, b)| libc::iovec {
                iov_base: (base as usize + o) as *mut libc::c_void,
                iov_len: b.len(),
            })
            .collect();
        let want: usize = chunk.iter().map(|(_, b)| b.len()).sum();
        match vm(true, &local, &remote) {
            Ok(n) if n == want => {}
            Ok(n) => {
                return Err(format!(
                    "only {n} of {want} bytes could be written at {base:#x}"
                ));
            }
            Err(e) if unsupported(&e) => {
                for &(o, b) in chunk {
                    // SAFETY: as in `read`: the interface vouches for it.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            b.as_ptr(),
                            (base as usize + o) as *mut u8,
                            b.len(),
                        )
                    };
                }
            }
            Err(e) => return Err(format!("the array at {base:#x} cannot be written ({e})")),
        }
    }
    Ok(())
}

/// Byte runs `(offset, len)` covering elements at `offsets` (element
/// offsets) of `size` bytes each, adjacent elements merged.
pub fn runs(offsets: &[usize], size: usize) -> Vec<(usize, usize)> {
    let mut sorted: Vec<usize> = offsets.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out: Vec<(usize, usize)> = Vec::new();
    for o in sorted {
        let at = o * size;
        match out.last_mut() {
            Some((start, len)) if *start + *len == at => *len += size,
            _ => out.push((at, size)),
        }
    }
    out
}
