//! zip (placeholder while the parser is written).

use super::Format;

pub static FORMAT: Format = Format {
    name: "zip",
    sniff: |_| false,
    parse: |_| unreachable!(),
    load: |_, _| Vec::new(),
};
