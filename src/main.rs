//! The `pparse` binary: the explorer (`pparse FILE`) and the headless
//! commands, all in [`pparse::cli`]; this only passes on its exit status.

fn main() {
    std::process::exit(pparse::cli::main());
}
