/work/main/fuzz/target/debug/deps/afl-aa9de831042ca6ec.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/afl-0.18.2/src/lib.rs

/work/main/fuzz/target/debug/deps/libafl-aa9de831042ca6ec.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/afl-0.18.2/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/afl-0.18.2/src/lib.rs:
