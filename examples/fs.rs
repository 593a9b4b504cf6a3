//! Nested containers as a file system, from Rust: lists what is under a
//! PATH of an archive (recursively), or copies one member's bytes to
//! stdout, at any depth, without unpacking anything.
//!
//! ```text
//! cargo run --example fs -- fixtures/nested.tar.gz nested.tar/docs
//! cargo run --example fs -- fixtures/nested.tar.gz nested.tar/docs/inner.zip/deep.zip/x.txt
//! ```

use std::io::{self, Write};
use std::process::ExitCode;

use pparse::fs::{Error, Fs};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(file), path) = (args.first(), args.get(1).map_or("", String::as_str)) else {
        eprintln!("usage: fs FILE [PATH]");
        return ExitCode::from(2);
    };
    match run(file, path) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fs: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(file: &str, path: &str) -> Result<(), Box<dyn std::error::Error>> {
    let fs = Fs::new(file)?;
    match fs.list(path, true) {
        Ok(entries) => {
            for e in entries {
                let why = e.reason.map(|r| format!(" ({r})")).unwrap_or_default();
                println!("{:>10}  {:<9}  {}{why}", e.size, e.status.as_str(), e.path);
            }
            Ok(())
        }
        // A member with bytes: copy them out.
        Err(Error::NotAContainer { .. }) => {
            let mut f = fs.open(path)?;
            io::copy(&mut f, &mut io::stdout().lock())?;
            io::stdout().flush()?;
            if f.status() != pparse::Status::Complete {
                eprintln!(
                    "fs: {path} is {}: what was recovered was written",
                    f.status()
                );
            }
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}
