//! The `linkerd-multus` command: [`linkerd_multus::commands`].
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    linkerd_multus::commands::main()
}
