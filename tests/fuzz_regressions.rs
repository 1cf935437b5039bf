//! The fuzz targets' invariants (`fuzz/src/targets.rs`) on every input the fuzzers
//! found breaking one (`testdata/fuzz/<target>/`, each now fixed) and on the seed
//! corpus made from `testdata/`: what `scripts/fuzz.sh` starts from.

#[path = "../fuzz/src/targets.rs"]
mod targets;

use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_saved_crash_now_holds_its_invariant() {
    let dir = root().join("testdata/fuzz");
    let mut seen = 0;
    for (name, target) in targets::TARGETS {
        let Ok(entries) = std::fs::read_dir(dir.join(name)) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let data = std::fs::read(&path).unwrap();
            eprintln!("{name}: {}", path.display());
            target(&data);
            seen += 1;
        }
    }
    // Each directory under testdata/fuzz is a target's.
    for entry in std::fs::read_dir(&dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        assert!(
            !entry.path().is_dir() || targets::find(&name).is_some(),
            "testdata/fuzz/{name} is no target's"
        );
    }
    eprintln!("{seen} saved inputs");
}

#[test]
fn the_seed_corpus_holds_every_invariant() {
    let seeds = targets::seeds(root());
    for (name, _) in targets::TARGETS {
        let count = seeds.iter().filter(|(t, _)| t == name).count();
        assert!(count >= 3, "only {count} seeds for {name}");
    }
    for (name, data) in &seeds {
        targets::find(name).expect("a target")(data);
    }
}
