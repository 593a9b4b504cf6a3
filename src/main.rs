//! The `pparse` binary: the explorer (`pparse FILE`) and the headless
//! commands, all in [`pparse::cli`]; this only passes on its exit status.

// Counted, for `--io-stats`' peak heap.
#[global_allocator]
static HEAP: pparse::data::stats::CountingAlloc = pparse::data::stats::CountingAlloc;

fn main() {
    std::process::exit(pparse::cli::main());
}
