/work/main/fuzz/target/debug/deps/json_patch-58e35e32a0a6b2ed.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/json-patch-5.0.0/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/json-patch-5.0.0/src/diff.rs

/work/main/fuzz/target/debug/deps/libjson_patch-58e35e32a0a6b2ed.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/json-patch-5.0.0/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/json-patch-5.0.0/src/diff.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/json-patch-5.0.0/src/lib.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/json-patch-5.0.0/src/diff.rs:
