# Container image of the linkerd-multus KRM function (kpt `image:` pipelines, kustomize
# `config.kubernetes.io/function: container:` transformers).
#
# Two final targets share one runtime layout (a FROM scratch image: the static binary, an
# /etc/passwd and /etc/group holding nobody, USER 65534:65534):
#
#   runtime           (default) builds the binary in the `build` stage; needs registry access
#                     to pull the Rust image:
#                       docker build -t localhost/linkerd-multus:dev .
#   runtime-prebuilt  copies a static binary already built on the host; pulls nothing, so it
#                     builds offline (scripts/container.sh does this with podman; the release
#                     builds its binaries with scripts/dist.sh, `cargo auditable build`):
#                       RUSTFLAGS='-C target-feature=+crt-static' cargo build --profile dist \
#                         --locked --target x86_64-unknown-linux-gnu
#                       podman build --target runtime-prebuilt -t localhost/linkerd-multus:dev .
#
# The shipped binary is built with the `dist` profile of Cargo.toml (release with thin LTO and
# one codegen unit) by `cargo auditable`, so it carries its dependency list; scripts/container.sh
# builds the image the tests run the same way with plain `--release` (PROFILE=dist for the
# shipped settings) and passes BINARY.
#
# Building `runtime-prebuilt` never touches the `build` stage: BuildKit and buildah (podman
# build; `--skip-unused-stages` is on by default, checked with podman 4.3.1 / buildah 1.28)
# only run the stages the target depends on, so the Rust image is not pulled.
# With podman 4.3 pass --layers=false when changing VERSION or SOURCE_URL: its layer cache
# ignores build-arg values, and a cached LABEL layer keeps the old ones.

ARG RUST_IMAGE=docker.io/library/rust:1.95-bookworm
# The target triple is explicit on purpose: with `--target`, RUSTFLAGS apply to the binary
# only, not to build scripts and proc macros (clap's derive), which cannot be linked with
# crt-static.
ARG TARGET=x86_64-unknown-linux-gnu

# ------------------------------------------------------------------------------------------
FROM ${RUST_IMAGE} AS build
ARG TARGET
WORKDIR /src
# Only what `cargo build` reads (.dockerignore keeps the rest out of the context). benches/
# is needed because Cargo.toml declares a [[bench]] target, which cargo checks on load.
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY benches ./benches
# glibc, linked statically: the binary reads stdin and writes stdout, it does no DNS or NSS
# lookups, so static glibc's limits there do not matter, and it runs in a FROM scratch image.
RUN RUSTFLAGS='-C target-feature=+crt-static' \
    cargo build --profile dist --locked --target "${TARGET}" --bin linkerd-multus \
 && cp "target/${TARGET}/dist/linkerd-multus" /linkerd-multus \
 && /linkerd-multus --help >/dev/null

# ------------------------------------------------------------------------------------------
FROM scratch AS runtime-base
ARG VERSION=0.1.0
ARG SOURCE_URL=https://github.com/linkerd-multus/linkerd-multus
# OCI annotations (https://github.com/opencontainers/image-spec/blob/main/annotations.md).
# The kpt function catalog has no label convention of its own: its metadata (image,
# description, tags such as `mutator`, sourceURL, license) lives in a metadata.yaml next to
# the function (functions/linkerd-multus/metadata.yaml here); these labels mirror it.
LABEL org.opencontainers.image.title="linkerd-multus" \
      org.opencontainers.image.description="KRM function (mutator) that attaches Linkerd-CNI to workloads through Multus: generates NetworkAttachmentDefinitions and sets k8s.v1.cni.cncf.io/networks." \
      org.opencontainers.image.source="${SOURCE_URL}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}"
# kpt runs function containers with `--user nobody`, which the runtime resolves through the
# image's /etc/passwd: without a nobody entry every kpt run fails. Numeric IDs in USER keep
# the image working for runtimes that do not read /etc/passwd (Kubernetes runAsNonRoot).
COPY container/passwd /etc/passwd
COPY container/group /etc/group
USER 65534:65534
# The Argo CD sidecar's plugin server runs `linkerd-multus render .` by name.
ENV PATH=/usr/local/bin
ENTRYPOINT ["/usr/local/bin/linkerd-multus"]

# ------------------------------------------------------------------------------------------
FROM runtime-base AS runtime-prebuilt
# Path of the static binary inside the build context (the default is where
# `cargo build --profile dist --target x86_64-unknown-linux-gnu` puts it).
ARG BINARY=target/x86_64-unknown-linux-gnu/dist/linkerd-multus
COPY --chmod=0755 ${BINARY} /usr/local/bin/linkerd-multus

# ------------------------------------------------------------------------------------------
# Last, so it is the default target.
FROM runtime-base AS runtime
COPY --from=build --chmod=0755 /linkerd-multus /usr/local/bin/linkerd-multus
