//! `linkerd multus install` and `uninstall`: their flags (the settings of a
//! `LinkerdMultusInstall` file, which they override) and what they print.

use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, FromArgMatches};

use super::{KubeFlags, go};
use crate::commands::outcome::{Error, Outcome};
use crate::extension::install::options::{Certs, FailurePolicy, Settings};
use crate::extension::{install, uninstall};

/// `install`'s flags, each overriding the same setting of `--config`.
#[derive(Debug, Args)]
pub struct InstallFlags {
    #[command(flatten)]
    kube: KubeFlags,
    /// A LinkerdMultusInstall file (multus.linkerd.io/v1alpha1) with these
    /// settings under spec; the flags given win over it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The extension's namespace [default: linkerd-multus].
    #[arg(long, value_name = "NAMESPACE")]
    namespace: Option<String>,
    /// The webhook's replicas [default: 2].
    #[arg(long, value_name = "N")]
    replicas: Option<u32>,
    /// What the API server does with a pod while no replica answers: Fail
    /// rejects it (its controller retries), Ignore admits it unattached [default: Fail].
    #[arg(long, value_enum, value_name = "POLICY")]
    failure_policy: Option<FailurePolicy>,
    /// The webhook pods' PriorityClass [default: system-cluster-critical].
    #[arg(long, value_name = "NAME")]
    priority_class_name: Option<String>,
    /// Also run the NAD controller, with its rights (deploy-nad-controller/) [default: false].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go::parse_bool)]
    manage_nads: Option<bool>,
    /// The namespace of the Linkerd-CNI ConfigMap the NAD controller reads
    /// (with --manage-nads) [default: linkerd-cni].
    #[arg(long, value_name = "NAMESPACE")]
    cni_namespace: Option<String>,
    /// Also run the network-resources rules, with their settings and rights
    /// (deploy-network-resources/) [default: false].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go::parse_bool)]
    network_resources: Option<bool>,
    /// Where the webhook's certificate comes from [default: generate].
    #[arg(long, value_enum, value_name = "SOURCE")]
    certs: Option<Certs>,
    /// Make new certificates without reading the cluster (--certs generate);
    /// otherwise those the cluster holds are kept while they are good [default: false].
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go::parse_bool)]
    ignore_cluster: Option<bool>,
}

/// `install`'s flags, and whether `-L` (or `LINKERD_NAMESPACE`) was given,
/// which only the parser knows: given, it wins over the file.
#[derive(Debug)]
pub struct InstallArgs {
    flags: InstallFlags,
    linkerd_namespace_given: bool,
}

fn linkerd_namespace_given(matches: &ArgMatches) -> bool {
    matches!(
        matches.value_source("linkerd_namespace"),
        Some(ValueSource::CommandLine | ValueSource::EnvVariable)
    )
}

impl FromArgMatches for InstallArgs {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(InstallArgs {
            flags: InstallFlags::from_arg_matches(matches)?,
            linkerd_namespace_given: linkerd_namespace_given(matches),
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        self.flags.update_from_arg_matches(matches)?;
        self.linkerd_namespace_given = linkerd_namespace_given(matches);
        Ok(())
    }
}

impl Args for InstallArgs {
    fn augment_args(command: clap::Command) -> clap::Command {
        InstallFlags::augment_args(command)
    }

    fn augment_args_for_update(command: clap::Command) -> clap::Command {
        InstallFlags::augment_args_for_update(command)
    }
}

impl InstallArgs {
    /// The settings the flags give.
    fn settings(&self) -> Settings {
        let f = &self.flags;
        Settings {
            namespace: f.namespace.clone(),
            linkerd_namespace: self
                .linkerd_namespace_given
                .then(|| f.kube.linkerd_namespace.clone()),
            replicas: f.replicas,
            failure_policy: f.failure_policy,
            priority_class_name: f.priority_class_name.clone(),
            manage_nads: f.manage_nads,
            cni_namespace: f.cni_namespace.clone(),
            network_resources: f.network_resources,
            certs: f.certs,
            ignore_cluster: f.ignore_cluster,
        }
    }

    /// Prints the manifests; notes go to stderr.
    pub fn run(self) -> Result<Outcome, Error> {
        self.flags.kube.init_logging();
        let file = match &self.flags.config {
            Some(path) => Settings::from_file(path).map_err(install::Error::from)?,
            None => Settings::default(),
        };
        let options = file
            .overridden_by(self.settings())
            .resolve()
            .map_err(install::Error::from)?;
        let target = self.flags.kube.target();
        let runtime = super::runtime().map_err(Error::Runtime)?;
        let installed = runtime.block_on(install::install(&target, &options))?;
        Ok(Outcome {
            stdout: installed.yaml,
            stderr: installed.note.map(|n| format!("{n}\n")).unwrap_or_default(),
            code: 0,
        })
    }
}

/// `uninstall`'s flags.
#[derive(Debug, Args)]
pub struct UninstallArgs {
    #[command(flatten)]
    kube: KubeFlags,
}

impl UninstallArgs {
    /// Prints what removes the extension; nothing, said on stderr, when it is not installed.
    pub fn run(self) -> Result<Outcome, Error> {
        self.kube.init_logging();
        let target = self.kube.target();
        let runtime = super::runtime().map_err(Error::Runtime)?;
        let objects = runtime.block_on(uninstall::objects(&target))?;
        let stderr = if objects.is_empty() {
            "linkerd-multus is not installed: no object labelled linkerd.io/extension=multus\n"
                .to_string()
        } else {
            String::new()
        };
        Ok(Outcome {
            stdout: uninstall::manifests(&objects),
            stderr,
            code: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        install: InstallArgs,
    }

    fn settings(args: &[&str]) -> Settings {
        let mut all = vec!["install"];
        all.extend(args);
        Cli::try_parse_from(all).unwrap().install.settings()
    }

    #[test]
    fn flags_give_settings_only_where_given() {
        assert_eq!(settings(&[]), Settings::default());
        let given = settings(&[
            "--namespace=mesh",
            "-L",
            "l5d",
            "--replicas",
            "3",
            "--failure-policy",
            "Ignore",
            "--manage-nads",
            "--network-resources=false",
            "--certs=cert-manager",
            "--ignore-cluster=true",
        ]);
        assert_eq!(
            given,
            Settings {
                namespace: Some("mesh".into()),
                linkerd_namespace: Some("l5d".into()),
                replicas: Some(3),
                failure_policy: Some(FailurePolicy::Ignore),
                manage_nads: Some(true),
                network_resources: Some(false),
                certs: Some(Certs::CertManager),
                ignore_cluster: Some(true),
                ..Settings::default()
            }
        );
    }

    #[test]
    fn bad_flag_values_are_refused_by_name() {
        for (args, want) in [
            (&["--replicas", "two"][..], "--replicas"),
            (&["--failure-policy", "fail"][..], "Fail, Ignore"),
            (&["--certs", "vault"][..], "generate, cert-manager"),
            (&["--manage-nads=maybe"][..], "--manage-nads"),
        ] {
            let mut all = vec!["install"];
            all.extend(args);
            let err = Cli::try_parse_from(all).err().unwrap().to_string();
            assert!(err.contains(want), "{args:?}: {err}");
        }
    }
}
