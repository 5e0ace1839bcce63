//! The tuned table's layout, as a `serde_json` formatter: one metadata key
//! a line, each point's heads, batch and tokens on its first line and then
//! one key a line, its measured schedules one a line, and every value inside
//! those compact (`[3,16,0,2,0]`). The checked-in `tuned.json` is written so;
//! a table reselected or re-tuned diffs line by line against it.

use std::io::{self, Write};

use serde_json::ser::Formatter;

/// Where the formatter is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Block {
    /// The table: one key a line.
    Table,
    /// `points`: one point after another.
    Points,
    /// A point: `heads`, `batch`, `tokens` on one line, then a key a line.
    Point,
    /// A point's `measured`: one entry a line.
    Measured,
    /// A measured entry: on one line, with a space after `:` and `,`.
    Entry,
    /// Any value inside those: no spaces.
    Compact,
}

/// The keys a point writes on its first line.
const POINT_HEAD: usize = 3;

#[derive(Debug, Default)]
pub struct TableLayout {
    /// The open objects and arrays, each with how many entries it has had.
    stack: Vec<(Block, usize)>,
    /// The key of the value being written (the last key written).
    key: String,
    in_key: bool,
}

impl TableLayout {
    fn open(&mut self, array: bool) -> Block {
        let block = match (self.stack.last().map(|b| b.0), array) {
            (None, _) => Block::Table,
            (Some(Block::Table), true) if self.key == "points" => Block::Points,
            (Some(Block::Points), false) => Block::Point,
            (Some(Block::Point), true) if self.key == "measured" => Block::Measured,
            (Some(Block::Measured), false) => Block::Entry,
            _ => Block::Compact,
        };
        self.stack.push((block, 0));
        block
    }

    /// The innermost block, counting one more entry in it; with the entries
    /// it had before.
    fn next_entry(&mut self) -> (Block, usize) {
        match self.stack.last_mut() {
            Some((block, n)) => {
                *n += 1;
                (*block, *n - 1)
            }
            None => (Block::Compact, 0),
        }
    }

    fn close(&mut self) -> (Block, usize) {
        self.stack.pop().unwrap_or((Block::Compact, 0))
    }
}

fn line(indent: usize) -> String {
    format!("\n{:indent$}", "")
}

impl Formatter for TableLayout {
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(false);
        w.write_all(b"{")
    }

    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        let end = match self.close() {
            (Block::Table, _) => line(0),
            (Block::Point, _) => line(4),
            _ => String::new(),
        };
        w.write_all(end.as_bytes())?;
        w.write_all(b"}")
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.in_key = true;
        self.key.clear();
        let (block, before) = self.next_entry();
        let comma = if first { "" } else { "," };
        let sep = match block {
            Block::Table => line(2),
            Block::Point if first || before >= POINT_HEAD => line(6),
            Block::Point | Block::Entry if !first => " ".into(),
            _ => String::new(),
        };
        w.write_all(comma.as_bytes())?;
        w.write_all(sep.as_bytes())
    }

    fn end_object_key<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.in_key = false;
        Ok(())
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        match self.stack.last().map(|b| b.0) {
            Some(Block::Compact) => w.write_all(b":"),
            _ => w.write_all(b": "),
        }
    }

    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(true);
        w.write_all(b"[")
    }

    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        let end = match self.close() {
            (Block::Points, n) if n > 0 => line(2),
            (Block::Measured, n) if n > 0 => line(6),
            _ => String::new(),
        };
        w.write_all(end.as_bytes())?;
        w.write_all(b"]")
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        let (block, _) = self.next_entry();
        if !first {
            w.write_all(b",")?;
        }
        match block {
            Block::Points => w.write_all(line(4).as_bytes()),
            Block::Measured => w.write_all(line(8).as_bytes()),
            _ => Ok(()),
        }
    }

    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        if self.in_key {
            self.key.push_str(fragment);
        }
        w.write_all(fragment.as_bytes())
    }
}
