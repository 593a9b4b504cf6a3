//! What happened to the bytes: complete, unverified, truncated or corrupt,
//! and where.

use std::fmt;

use crate::data::Range;

/// The state of an extraction or a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Status {
    /// Everything the structure promises is there and checks out.
    #[default]
    Complete,
    /// The bytes end before the structure does; what exists is kept.
    Truncated,
    /// The bytes decoded without an error, but a check over them failed or
    /// could not be made, and nothing proves them right or wrong (a gzip
    /// member whose CRC fails after data that decoded cleanly): kept, and
    /// never called complete.
    Unverified,
    /// Bytes are there but wrong: bad checksum, invalid header, garbage.
    Corrupt,
}

impl Status {
    /// The spelling used in `--json` output.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Complete => "complete",
            Status::Unverified => "unverified",
            Status::Truncated => "truncated",
            Status::Corrupt => "corrupt",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One damaged or missing span, in the coordinates of the bytes it was found
/// in, with the reason in words a user can act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// Truncated or corrupt.
    pub status: Status,
    /// Where, in the extraction's own offsets (empty: a point).
    pub range: Range,
    /// Why, in words.
    pub reason: String,
    /// The bytes are not wrong but unknown: a decoder after damage could
    /// not know them (copies of a lost window); they read as zeros. An empty
    /// range marks where such a stream begins. The status is `Corrupt`;
    /// `extract` writes what comes before the first unknown byte.
    pub unknown: bool,
}

impl Damage {
    /// Bytes missing at `range` (or from there on).
    pub fn truncated(range: Range, reason: impl Into<String>) -> Damage {
        Damage {
            status: Status::Truncated,
            range,
            reason: reason.into(),
            unknown: false,
        }
    }
    /// Bytes at `range` that decoded without an error but that a failed
    /// check covers: not proved right or wrong.
    pub fn unverified(range: Range, reason: impl Into<String>) -> Damage {
        Damage {
            status: Status::Unverified,
            range,
            reason: reason.into(),
            unknown: false,
        }
    }
    /// Bytes at `range` that are wrong.
    pub fn corrupt(range: Range, reason: impl Into<String>) -> Damage {
        Damage {
            status: Status::Corrupt,
            range,
            reason: reason.into(),
            unknown: false,
        }
    }
    /// Bytes at `range` that could not be known (see [`Damage::unknown`]).
    pub fn unknown(range: Range, reason: impl Into<String>) -> Damage {
        Damage {
            unknown: true,
            ..Damage::corrupt(range, reason)
        }
    }
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.range.is_empty() {
            write!(
                f,
                "{} at {:#x}: {}",
                self.status, self.range.start, self.reason
            )
        } else {
            write!(f, "{} at {}: {}", self.status, self.range, self.reason)
        }
    }
}

/// The overall status of a list of damages: corrupt beats unverified, which
/// beats truncated (a cut promises that what exists is exact; unverified
/// bytes promise nothing).
pub fn worst(damage: &[Damage]) -> Status {
    damage
        .iter()
        .map(|d| d.status)
        .max()
        .unwrap_or(Status::Complete)
}
