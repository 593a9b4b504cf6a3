//! What a dataset's header says of it: its shape, type, layout, filters
//! and fill value, and where its values are when they are in one range.

use crate::data::Range;
use crate::offer::tensor::{numel, shape_text};

use super::read::{self, Header, Layout, Space, Superblock, msg};

/// What a dataset's header says of it.
pub(crate) struct Dataset {
    pub(crate) space: Option<Space>,
    pub(crate) dtype: Option<read::Type>,
    pub(crate) layout: Option<Layout>,
    pub(crate) filters: Vec<u16>,
    /// Its largest dimensions (`None`: unlimited), when recorded.
    pub(crate) max: Option<Vec<Option<u64>>>,
    /// One element of its fill value, when one is defined.
    pub(crate) fill: Option<Vec<u8>>,
}

impl Dataset {
    pub(crate) fn of(sb: &Superblock, h: &Header) -> Dataset {
        Dataset {
            space: h
                .find(msg::DATASPACE)
                .and_then(|m| read::dataspace(m, sb).ok()),
            dtype: h.find(msg::DATATYPE).and_then(|m| read::datatype(m).ok()),
            layout: h.find(msg::LAYOUT).and_then(|m| read::layout(m, sb).ok()),
            filters: h
                .find(msg::FILTERS)
                .and_then(|m| read::filters(m).ok())
                .unwrap_or_default(),
            max: h.find(msg::DATASPACE).and_then(|m| read::max_dims(m, sb)),
            fill: read::fill_value(h),
        }
    }

    pub(crate) fn shape(&self) -> Option<Vec<u64>> {
        match &self.space {
            Some(Space::Scalar) => Some(Vec::new()),
            Some(Space::Simple(d)) => Some(d.clone()),
            _ => None,
        }
    }

    pub(crate) fn summary(&self) -> String {
        let t = self.dtype.as_ref().map_or("?".into(), |t| t.text());
        let shape = match &self.space {
            Some(Space::Null) => "null".to_string(),
            _ => self.shape().map_or("?".into(), |s| shape_text(&s)),
        };
        let layout = match &self.layout {
            Some(Layout::Compact(_)) => "compact".to_string(),
            Some(Layout::Contiguous { .. }) => "contiguous".to_string(),
            Some(Layout::Chunked(c)) => {
                format!("chunked {} ({})", shape_text(&c.dims), c.kind.name())
            }
            Some(Layout::Virtual) => "virtual".to_string(),
            None => "?".to_string(),
        };
        let filters: Vec<String> = self.filters.iter().map(|&f| read::filter_name(f)).collect();
        let filters = if filters.is_empty() {
            String::new()
        } else {
            format!(", {}", filters.join("+"))
        };
        format!("{t} {shape}, {layout}{filters}")
    }

    /// Where its values are in the file, when they are in one range.
    pub(crate) fn range(&self) -> Option<Range> {
        match self.layout.as_ref()? {
            Layout::Compact(r) => Some(*r),
            Layout::Contiguous { at: Some(at), size } => {
                let n = size.or_else(|| self.nbytes())?;
                Some(Range::new(*at, at.checked_add(n)?))
            }
            // Nothing allocated for a dataset of no values.
            Layout::Contiguous { at: None, .. } if self.nbytes() == Some(0) => {
                Some(Range::new(0, 0))
            }
            _ => None,
        }
    }

    /// The bytes its values take, by its shape and type.
    pub(crate) fn nbytes(&self) -> Option<u64> {
        let t = self.dtype.as_ref()?;
        numel(&self.shape()?)?.checked_mul(u64::from(t.size))
    }

    /// Whether its values may be a file's bytes, worth sniffing: one
    /// dimension of unsigned bytes (`np.frombuffer(data, np.uint8)`) or an
    /// opaque type. Numbers are not sniffed: any four of them can look
    /// like a format's first bytes (an i32 of 640 is a pickle's `\x80\x02`).
    pub(crate) fn may_hold_a_file(&self) -> bool {
        let one_dim = matches!(&self.space, Some(Space::Simple(d)) if d.len() == 1);
        match &self.dtype {
            Some(t) if t.class == 0 && t.size == 1 && !t.signed => one_dim,
            Some(t) if t.class == 5 => true,
            _ => false,
        }
    }
}
