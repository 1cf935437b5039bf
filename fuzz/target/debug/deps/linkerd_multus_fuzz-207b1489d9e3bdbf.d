/work/main/fuzz/target/debug/deps/linkerd_multus_fuzz-207b1489d9e3bdbf.d: src/main.rs src/targets.rs

/work/main/fuzz/target/debug/deps/liblinkerd_multus_fuzz-207b1489d9e3bdbf.rmeta: src/main.rs src/targets.rs

src/main.rs:
src/targets.rs:
