//! Where things are in the hex pane: the offset column, the hex columns and
//! the text column. Drawing places bytes with it and mouse input maps a
//! click back to a byte with it, so the two cannot disagree.

/// Columns of one hex row inside the pane's border.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HexGrid {
    /// Bytes per row.
    pub bpr: u64,
    /// First column of the hex bytes.
    pub hex_x: u16,
    /// Column of the separator before the text bytes.
    pub ascii_x: u16,
}

/// Width of the offset column: 12 digits past 4 GiB, else 8.
pub(crate) fn offset_width(len: u64) -> u16 {
    if len > u32::MAX as u64 { 12 } else { 8 }
}

/// Columns a row of `bpr` bytes needs: the offset, 2 spaces, 3 columns and
/// 1 text column per byte, a gap every 8 bytes, the separator and a space.
pub(crate) fn row_width(offw: u16, bpr: u64) -> u64 {
    offw as u64 + 2 + bpr * 4 + (bpr / 8).saturating_sub(1) + 2
}

impl HexGrid {
    /// The grid of a pane whose inner area starts at column `inner_x`,
    /// for bytes of length `len`.
    pub(crate) fn new(inner_x: u16, len: u64, bpr: u64) -> HexGrid {
        let hex_x = inner_x + offset_width(len) + 2;
        let ascii_x = hex_x + (bpr as u16) * 3 + 1 + (bpr as u16 / 8).saturating_sub(1);
        HexGrid {
            bpr,
            hex_x,
            ascii_x,
        }
    }

    /// Column of byte `i` of a row in the hex columns.
    pub(crate) fn hex_col(&self, i: u64) -> u16 {
        self.hex_x + (i as u16) * 3 + (i / 8) as u16
    }

    /// Column of byte `i` of a row in the text column.
    pub(crate) fn text_col(&self, i: u64) -> u16 {
        self.ascii_x + i as u16 + 1
    }

    /// The byte of a row under column `x`, in either column.
    pub(crate) fn byte_at(&self, x: u16) -> Option<u64> {
        let bpr = self.bpr;
        let col = if x > self.ascii_x && x < self.ascii_x + 1 + bpr as u16 {
            (x - self.ascii_x - 1) as u64
        } else if x >= self.hex_x && x < self.ascii_x {
            let rel = x - self.hex_x;
            // Each group of 8 bytes takes 24 columns plus one gap.
            let group = rel / 25;
            let within = (rel % 25).min(23);
            (group * 8 + within / 3) as u64
        } else {
            return None;
        };
        (col < bpr).then_some(col)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_click_finds_the_byte_drawn_there() {
        for bpr in [4, 8, 16, 24, 32] {
            let g = HexGrid::new(1, 1000, bpr);
            for i in 0..bpr {
                assert_eq!(g.byte_at(g.hex_col(i)), Some(i), "hex {i} of {bpr}");
                assert_eq!(g.byte_at(g.hex_col(i) + 1), Some(i));
                assert_eq!(g.byte_at(g.text_col(i)), Some(i), "text {i} of {bpr}");
            }
            assert_eq!(g.byte_at(0), None);
        }
    }
}
