//! The identity KRM function the benchmark compares against: it reads a
//! ResourceList on stdin, parses it and writes it back with the same YAML code
//! as `linkerd-multus`, and does nothing else.

use std::io::{Read, Write};
use std::process::ExitCode;

use linkerd_multus::yaml::{emit_document, parse_document};

fn main() -> ExitCode {
    let mut src = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut src) {
        eprintln!("identity: cannot read stdin: {e}");
        return ExitCode::FAILURE;
    }
    let node = match parse_document(&src) {
        Ok(node) => node,
        Err(e) => {
            eprintln!("identity: {e}");
            return ExitCode::FAILURE;
        }
    };
    let out = emit_document(&node);
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
    {
        eprintln!("identity: cannot write stdout: {e}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
