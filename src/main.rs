fn main() {
    std::process::exit(pparse::cli::main());
}
