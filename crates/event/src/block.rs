//! Block request operations and flags.

/// A block request's operation (the kernel's `REQ_OP_*` value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BlockOp {
    /// REQ_OP_READ.
    Read,
    /// REQ_OP_WRITE.
    Write,
    /// REQ_OP_FLUSH.
    Flush,
    /// REQ_OP_DISCARD.
    Discard,
    /// REQ_OP_SECURE_ERASE.
    SecureErase,
    /// REQ_OP_WRITE_ZEROES.
    WriteZeroes,
    /// Any other operation (zone management, driver private), with its code.
    Other(u16),
}

impl BlockOp {
    /// Decode the kernel's op code.
    pub fn from_u16(v: u16) -> Self {
        match v {
            0 => Self::Read,
            1 => Self::Write,
            2 => Self::Flush,
            3 => Self::Discard,
            5 => Self::SecureErase,
            9 => Self::WriteZeroes,
            o => Self::Other(o),
        }
    }
    /// The kernel's op code.
    pub fn code(self) -> u16 {
        match self {
            Self::Read => 0,
            Self::Write => 1,
            Self::Flush => 2,
            Self::Discard => 3,
            Self::SecureErase => 5,
            Self::WriteZeroes => 9,
            Self::Other(o) => o,
        }
    }
    /// Name used in output and filters (`blk.op`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Flush => "flush",
            Self::Discard => "discard",
            Self::SecureErase => "secure_erase",
            Self::WriteZeroes => "write_zeroes",
            Self::Other(_) => "other",
        }
    }
    /// Parse a name (as printed by [`BlockOp::name`]).
    pub fn from_name(s: &str) -> Option<Self> {
        [Self::Read, Self::Write, Self::Flush, Self::Discard, Self::SecureErase, Self::WriteZeroes]
            .into_iter()
            .find(|o| o.name() == s)
    }
}

/// Request flag bits, as stored in the `flags` column of block events.
/// latscope's own bit values: the probe maps the kernel's (version-dependent) bits onto them.
pub struct Rwbs;

impl Rwbs {
    /// REQ_SYNC.
    pub const SYNC: u32 = 1;
    /// REQ_META.
    pub const META: u32 = 2;
    /// REQ_FUA.
    pub const FUA: u32 = 4;
    /// REQ_PREFLUSH.
    pub const PREFLUSH: u32 = 8;
    /// REQ_RAHEAD.
    pub const RAHEAD: u32 = 16;

    /// The rwbs string blktrace and perf print (`WS`, `RA`, `FWFS`, ...).
    pub fn format(op: BlockOp, flags: u32) -> String {
        let mut s = String::new();
        let _ = Self::write(&mut s, op, flags);
        s
    }

    /// [`Rwbs::format`] into a writer, without allocating.
    pub fn write(w: &mut impl std::fmt::Write, op: BlockOp, flags: u32) -> std::fmt::Result {
        if flags & Self::PREFLUSH != 0 {
            w.write_char('F')?;
        }
        w.write_str(match op {
            BlockOp::Write | BlockOp::WriteZeroes => "W",
            BlockOp::Read => "R",
            BlockOp::Discard => "D",
            BlockOp::SecureErase => "DE",
            BlockOp::Flush => "F",
            BlockOp::Other(_) => "N",
        })?;
        for (bit, c) in [(Self::FUA, 'F'), (Self::RAHEAD, 'A'), (Self::SYNC, 'S'), (Self::META, 'M')] {
            if flags & bit != 0 {
                w.write_char(c)?;
            }
        }
        Ok(())
    }

    /// Parse an rwbs string (as in `perf script` output) into an op and flag bits.
    pub fn parse(s: &str) -> Option<(BlockOp, u32)> {
        let mut chars: Vec<char> = s.chars().collect();
        let mut flags = 0;
        // A leading F followed by another op letter is the preflush marker.
        if chars.len() > 1 && chars[0] == 'F' && matches!(chars[1], 'W' | 'R' | 'D' | 'N' | 'F') {
            flags |= Self::PREFLUSH;
            chars.remove(0);
        }
        let op = match chars.first()? {
            'W' => BlockOp::Write,
            'R' => BlockOp::Read,
            'D' => {
                if chars.get(1) == Some(&'E') {
                    chars.remove(1);
                    BlockOp::SecureErase
                } else {
                    BlockOp::Discard
                }
            }
            'F' => BlockOp::Flush,
            'N' => BlockOp::Other(0xff),
            _ => return None,
        };
        for c in &chars[1..] {
            flags |= match c {
                'F' => Self::FUA,
                'A' => Self::RAHEAD,
                'S' => Self::SYNC,
                'M' => Self::META,
                _ => return None,
            };
        }
        Some((op, flags))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn rwbs_roundtrip() {
        for (op, f) in [
            (BlockOp::Write, Rwbs::SYNC),
            (BlockOp::Read, Rwbs::RAHEAD),
            (BlockOp::Write, Rwbs::PREFLUSH | Rwbs::FUA | Rwbs::SYNC),
            (BlockOp::Discard, 0),
            (BlockOp::Flush, Rwbs::PREFLUSH),
        ] {
            let s = Rwbs::format(op, f);
            assert_eq!(Rwbs::parse(&s), Some((op, f)), "{s}");
        }
        assert_eq!(Rwbs::format(BlockOp::Write, Rwbs::SYNC), "WS");
        assert_eq!(Rwbs::parse("X"), None);
    }
}
