//! The fuzzer's binary: `linkerd-multus-fuzz TARGET` under AFL++ (`cargo afl fuzz ...
//! -- linkerd-multus-fuzz TARGET`, as scripts/fuzz.sh runs it), or
//! `linkerd-multus-fuzz seed REPO DIR` to write each target's seed corpus, made from
//! the repository's testdata/, to DIR/TARGET/.

mod targets;

use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [seed, repo, dir] if seed == "seed" => {
            for (name, _) in targets::TARGETS {
                std::fs::create_dir_all(Path::new(dir).join(name)).expect("create the corpus");
            }
            for (i, (name, data)) in targets::seeds(Path::new(repo)).iter().enumerate() {
                std::fs::write(Path::new(dir).join(name).join(format!("seed-{i:04}")), data)
                    .expect("write a seed");
            }
            ExitCode::SUCCESS
        }
        [name] => match targets::find(name) {
            Some(target) => {
                afl::fuzz!(|data: &[u8]| target(data));
                ExitCode::SUCCESS
            }
            None => {
                eprintln!("no target {name}; the targets: {}", names());
                ExitCode::from(2)
            }
        },
        _ => {
            eprintln!(
                "usage: linkerd-multus-fuzz TARGET | seed REPO DIR; the targets: {}",
                names()
            );
            ExitCode::from(2)
        }
    }
}

fn names() -> String {
    let names: Vec<_> = targets::TARGETS.iter().map(|(n, _)| *n).collect();
    names.join(", ")
}
