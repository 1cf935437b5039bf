/work/main/fuzz/target/debug/deps/home-ed46a716c6391383.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/home-0.5.12/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/home-0.5.12/src/env.rs

/work/main/fuzz/target/debug/deps/libhome-ed46a716c6391383.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/home-0.5.12/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/home-0.5.12/src/env.rs

/work/main/fuzz/target/debug/deps/libhome-ed46a716c6391383.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/home-0.5.12/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/home-0.5.12/src/env.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/home-0.5.12/src/lib.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/home-0.5.12/src/env.rs:
