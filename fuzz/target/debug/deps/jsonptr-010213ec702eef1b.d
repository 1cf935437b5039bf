/work/main/fuzz/target/debug/deps/jsonptr-010213ec702eef1b.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/assign.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/delete.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/resolve.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/diagnostic.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/pointer.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/pointer/slice.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/token.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/index.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/component.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/../README.md

/work/main/fuzz/target/debug/deps/libjsonptr-010213ec702eef1b.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/assign.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/delete.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/resolve.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/diagnostic.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/pointer.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/pointer/slice.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/token.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/index.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/component.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/../README.md

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/lib.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/assign.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/delete.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/resolve.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/diagnostic.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/pointer.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/pointer/slice.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/token.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/index.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/component.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/jsonptr-0.8.2/src/../README.md:

# env-dep:CARGO_PKG_VERSION=0.8.2
