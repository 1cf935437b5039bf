/work/main/fuzz/target/debug/deps/xdg-fd44f5319c6f0d99.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/xdg-3.0.0/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/xdg-3.0.0/src/base_directories.rs

/work/main/fuzz/target/debug/deps/libxdg-fd44f5319c6f0d99.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/xdg-3.0.0/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/xdg-3.0.0/src/base_directories.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/xdg-3.0.0/src/lib.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/xdg-3.0.0/src/base_directories.rs:
