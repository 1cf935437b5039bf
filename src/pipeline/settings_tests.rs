use super::*;
use crate::pipeline::environment::tests::env;
use crate::yaml::parse_document;

const LM: &str =
    "apiVersion: multus.linkerd.io/v1alpha1\nkind: LinkerdMultus\nspec: {nadName: from-object}\n";
const NR: &str = "apiVersion: multus.linkerd.io/v1alpha1\nkind: NetworkResources\n";
const VALIDATION: &str = "apiVersion: multus.linkerd.io/v1alpha1\nkind: Validation\n";
const CONFIG_MAP: &str = "apiVersion: v1\nkind: ConfigMap\ndata: {}\n";
const SECRET: &str = "apiVersion: v1\nkind: Secret\n";

/// What the functionConfig `src` resolves to for a front that takes `takes`:
/// the rule set's kind, or the error.
fn dispatch(takes: Takes, src: &str) -> String {
    let node = parse_document(src).unwrap();
    let mut sources = Sources::new(takes);
    sources.given = Given::FunctionConfig(&node);
    match resolve(sources) {
        Ok(FunctionConfig::LinkerdMultus(_)) => "LinkerdMultus".into(),
        Ok(FunctionConfig::NetworkResources(_)) => "NetworkResources".into(),
        Ok(FunctionConfig::Validation(_)) => "Validation".into(),
        Err(e) => format!("error: {e}"),
    }
}

#[test]
fn the_kind_names_the_rules_a_front_takes() {
    let all = "LinkerdMultus, NetworkResources or Validation (multus.linkerd.io/v1alpha1)";
    let cases = [
        (Takes::Any, LM, "LinkerdMultus".to_string()),
        (Takes::Any, NR, "NetworkResources".into()),
        (Takes::Any, VALIDATION, "Validation".into()),
        (Takes::Any, CONFIG_MAP, "LinkerdMultus".into()),
        (Takes::Any, "null", "LinkerdMultus".into()),
        (
            Takes::Any,
            SECRET,
            format!("error: functionConfig must be a {all} or a ConfigMap, not Secret (v1)"),
        ),
        (
            Takes::Any,
            "[]",
            "error: functionConfig is a sequence, not a mapping".into(),
        ),
        (Takes::Validation, VALIDATION, "Validation".into()),
        (Takes::Validation, CONFIG_MAP, "Validation".into()),
        (Takes::Validation, "null", "Validation".into()),
        (
            Takes::Validation,
            LM,
            "error: functionConfig must be a Validation (multus.linkerd.io/v1alpha1) or a ConfigMap, not LinkerdMultus (multus.linkerd.io/v1alpha1)".into(),
        ),
        (Takes::LinkerdMultus, CONFIG_MAP, "LinkerdMultus".into()),
        (
            Takes::LinkerdMultus,
            VALIDATION,
            format!(
                "error: functionConfig must be a {all} or a ConfigMap, not Validation (multus.linkerd.io/v1alpha1)"
            ),
        ),
        (Takes::NetworkResources, NR, "NetworkResources".into()),
        (Takes::NetworkResources, CONFIG_MAP, "NetworkResources".into()),
        (
            Takes::NetworkResources,
            "null",
            "error: functionConfig is null, not a mapping".into(),
        ),
        (
            Takes::NetworkResources,
            SECRET,
            format!("error: functionConfig must be a {all} or a ConfigMap, not Secret (v1)"),
        ),
    ];
    for (takes, src, want) in cases {
        assert_eq!(dispatch(takes, src), want, "{takes:?} {src}");
    }
    let err = resolve(Sources::new(Takes::Rendering)).unwrap();
    assert_eq!(err, FunctionConfig::LinkerdMultus(Default::default()));
}

#[test]
fn one_object_at_most() {
    let (lm, other) = (parse_document(LM).unwrap(), parse_document(LM).unwrap());
    let found = vec![(&lm, "a.yaml".to_string()), (&other, "b.yaml".to_string())];
    let mut sources = Sources::new(Takes::Rendering);
    sources.found = found.clone();
    let err = resolve(sources).unwrap_err().to_string();
    assert_eq!(
        err,
        "settings are given twice: a LinkerdMultus in a.yaml and another in b.yaml; keep one"
    );
    let mut sources = Sources::new(Takes::Validation);
    sources.found = found[..1].to_vec();
    sources.given = Given::File {
        source: "--config",
        path: Path::new("v.yaml"),
    };
    let err = resolve(sources).unwrap_err().to_string();
    assert_eq!(
        err,
        "settings are given twice: --config v.yaml and the Validation in a.yaml; keep one"
    );
    let mut sources = Sources::new(Takes::Rendering);
    sources.found = found[..1].to_vec();
    let Ok(FunctionConfig::LinkerdMultus(settings)) = resolve(sources) else {
        panic!("the object is read");
    };
    assert_eq!(settings.nad_name, "from-object");
}

#[test]
fn files_name_themselves_and_where_their_kind_goes() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let (lm, nr, val, bad) = (
        write("lm.yaml", LM),
        write("nr.yaml", NR),
        write("v.yaml", VALIDATION),
        write("bad.yaml", "a: ["),
    );
    let missing = dir.path().join("missing.yaml");
    let file = |takes, source, path: &Path| {
        let mut sources = Sources::new(takes);
        sources.given = Given::File { source, path };
        resolve(sources).map(|_| ()).unwrap_err().to_string()
    };
    let shown = |path: &Path| path.display().to_string();
    let cases = [
        (
            file(Takes::LinkerdMultus, "--config", &nr),
            format!(
                "--config {nr}: is a NetworkResources: the webhook takes it as --network-resources {nr} (--config holds the LinkerdMultus settings)",
                nr = shown(&nr)
            ),
        ),
        (
            file(Takes::NetworkResources, "--network-resources", &lm),
            format!(
                "--network-resources {}: is a LinkerdMultus: give it as --config; --network-resources takes a NetworkResources (multus.linkerd.io/v1alpha1) or a ConfigMap",
                shown(&lm)
            ),
        ),
        (
            file(Takes::Rendering, "--config", &val),
            format!(
                "--config {} is a Validation: it configures linkerd-multus validate, which checks files without rendering them",
                shown(&val)
            ),
        ),
        (
            file(Takes::Rendering, "--config", &bad),
            format!("--config {}: not valid YAML: ", shown(&bad)),
        ),
        (
            file(Takes::Validation, "--config", &missing),
            format!("--config {}: No such file", shown(&missing)),
        ),
    ];
    for (got, want) in cases {
        assert!(got.starts_with(&want), "{got}\nwant {want}");
    }
}

#[test]
fn the_environment_then_flags_then_the_namespace_variable() {
    let read = env(&[
        ("LINKERD_MULTUS_NAD_NAME", "plain"),
        ("LINKERD_MULTUS_CNI_NAMESPACE", "plain"),
        ("ARGOCD_ENV_LINKERD_MULTUS_NAD_NAME", "argo"),
        ("PARAM_LINKERDNAMESPACE", "param"),
        ("ARGOCD_APP_NAMESPACE", "destination"),
    ]);
    let resolved = |argocd, flags: Vec<Value>, node: Option<&Node>| {
        let mut sources = Sources::new(Takes::Rendering);
        sources.environment = Some(Environment {
            read: &read,
            argocd,
            namespace_variables: &["ARGOCD_APP_NAMESPACE"],
        });
        sources.flags = flags;
        if let Some(node) = node {
            sources.found = vec![(node, "nr.yaml".to_string())];
        }
        resolve(sources)
    };
    let Ok(FunctionConfig::LinkerdMultus(settings)) = resolved(true, Vec::new(), None) else {
        panic!("resolves");
    };
    assert_eq!(
        (
            &*settings.nad_name,
            &*settings.cni_namespace,
            &*settings.linkerd_namespace,
            settings.default_namespace.as_deref()
        ),
        ("argo", "plain", "param", Some("destination"))
    );
    let flags = vec![
        Value::flag("nad-name", "nadName", "flag".into()),
        Value::flag("default-namespace", "defaultNamespace", "apps".into()),
    ];
    let Ok(FunctionConfig::LinkerdMultus(settings)) = resolved(false, flags, None) else {
        panic!("resolves");
    };
    assert_eq!(
        (&*settings.nad_name, settings.default_namespace.as_deref()),
        ("flag", Some("apps"))
    );
    let bad = vec![Value::flag("nad-name", "nadName", "Bad_".into())];
    let err = resolved(false, bad, None).unwrap_err().to_string();
    assert!(
        err.starts_with("--nad-name: setting nadName: \"Bad_\""),
        "{err}"
    );
    // The network-resources rules read no variable, and refuse the flags.
    let nr = parse_document(NR).unwrap();
    assert!(matches!(
        resolved(true, Vec::new(), Some(&nr)),
        Ok(FunctionConfig::NetworkResources(_))
    ));
    let flags = vec![Value::flag("nad-name", "nadName", "x".into())];
    let err = resolved(true, flags, Some(&nr)).unwrap_err().to_string();
    assert_eq!(
        err,
        "--nad-name is a LinkerdMultus setting, but nr.yaml is a NetworkResources: settings of the network-resources rules go in it"
    );
}

/// Settings that contradict each other are refused once every source is layered, whichever
/// gave each: the object, a variable, a flag; the error names where the object is.
#[test]
fn contradicting_settings_are_refused_after_layering() {
    let object = parse_document(
        "apiVersion: multus.linkerd.io/v1alpha1\nkind: LinkerdMultus\nspec:\n  skipSecondarySubnets: enabled\n",
    )
    .unwrap();
    let resolved = |variables: &[(&'static str, &'static str)], flags: Vec<Value>| {
        let read = env(variables);
        let mut sources = Sources::new(Takes::Rendering);
        sources.environment = Some(Environment {
            read: &read,
            argocd: false,
            namespace_variables: &[],
        });
        sources.flags = flags;
        sources.found = vec![(&object, "settings.yaml".to_string())];
        resolve(sources).map(|_| ()).map_err(|e| e.to_string())
    };
    assert_eq!(
        resolved(&[], Vec::new()).unwrap_err(),
        "settings.yaml: settings: skipSecondarySubnets is enabled but clusterCIDRs is not set: without the cluster's pod and service networks, a secondary network's subnet that overlaps them would take meshed traffic away from the proxy; set clusterCIDRs (for example 10.244.0.0/16,10.96.0.0/12)"
    );
    assert_eq!(
        resolved(
            &[("LINKERD_MULTUS_CLUSTER_CIDRS", "10.244.0.0/16")],
            Vec::new()
        ),
        Ok(())
    );
    let flag = Value::flag("cluster-cidrs", "clusterCIDRs", "10.244.0.0/16".into());
    assert_eq!(resolved(&[], vec![flag]), Ok(()));
    let off = Value::flag(
        "skip-secondary-subnets",
        "skipSecondarySubnets",
        "disabled".into(),
    );
    assert_eq!(resolved(&[], vec![off]), Ok(()));
}

/// A settings object of a near-miss apiVersion or kind is refused wherever it
/// is given, naming the object, what is written and what to write; among the
/// renderer's inputs it is a settings object (never printed), and the error
/// names its file.
#[test]
fn near_misses_are_refused() {
    let object = |api_version: &str, kind: &str| {
        format!("apiVersion: {api_version}\nkind: {kind}\nmetadata: {{name: s}}\n")
    };
    let version = |v: &str| {
        format!(
            "apiVersion {v:?} is not one linkerd-multus reads; write apiVersion: multus.linkerd.io/v1alpha1"
        )
    };
    let cases = [
        (object("multus.linkerd.io/v1", "LinkerdMultus"), format!("LinkerdMultus s: {}", version("multus.linkerd.io/v1"))),
        (object("multus.linkerd.io/v1beta1", "NetworkResources"), format!("NetworkResources s: {}", version("multus.linkerd.io/v1beta1"))),
        (object("linkerd.io/v1alpha1", "Validation"), format!("Validation s: {}", version("linkerd.io/v1alpha1"))),
        (object("v1", "LinkerdMultus"), format!("LinkerdMultus s: {}", version("v1"))),
        (
            object("multus.linkerd.io/v1alpha1", "LinkerdMultis"),
            "LinkerdMultis s: multus.linkerd.io/v1alpha1 has no kind \"LinkerdMultis\"; write kind: LinkerdMultus".into(),
        ),
        (
            object("multus.linkerd.io/v1", "Settings"),
            "Settings s: apiVersion \"multus.linkerd.io/v1\" is not one linkerd-multus reads, and multus.linkerd.io/v1alpha1 has no kind \"Settings\"; write apiVersion: multus.linkerd.io/v1alpha1 and a kind of LinkerdMultus, NetworkResources, Validation or LinkerdMultusInstall".into(),
        ),
    ];
    for (src, want) in cases {
        let node = parse_document(&src).unwrap();
        assert_eq!(
            dispatch(Takes::Any, &src),
            format!("error: {want}"),
            "{src}"
        );
        assert!(Takes::Rendering.is_settings_object(&node), "{src}");
        assert!(Takes::Validation.is_settings_object(&node), "{src}");
        assert!(!Takes::Any.is_settings_object(&node), "{src}");
        let mut sources = Sources::new(Takes::Rendering);
        sources.found = vec![(&node, "settings.yaml".to_string())];
        let err = resolve(sources).unwrap_err().to_string();
        assert_eq!(err, format!("settings.yaml: {want}"));
    }
    for fine in [
        LM,
        NR,
        VALIDATION,
        CONFIG_MAP,
        SECRET,
        "apiVersion: multus.linkerd.io/v1alpha1\nkind: LinkerdMultusInstall\n",
    ] {
        let node = parse_document(fine).unwrap();
        assert!(near_miss(&node).is_none(), "{fine}");
    }
}

/// The ConfigMap kpt makes of `kpt fn eval ... -- key=value`: its errors name
/// the arguments, every unknown one at once; a ConfigMap of the user's, named
/// as the user wrote it, keeps its name out of the message too (the front
/// names its file).
#[test]
fn kpt_arguments_are_named_as_written() {
    let kpt = |data: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: function-input\ndata: {{{data}}}\n"
        )
    };
    for (src, want) in [
        (
            kpt("nadNme: x"),
            "error: the argument `nadNme=x` after `--`: unknown setting \"nadNme\" (did you mean nadName?); valid settings are cniNamespace, linkerdNamespace, nadName, cniKubeconfig, cniVersion, uidRangeAnnotation, proxyUIDOffset, namespaces, workloadKinds, defaultNamespace, configRollout, nadSyncWave",
        ),
        (
            kpt("nadNme: x, cniNamespace: cni, colour: blue"),
            "error: the arguments `nadNme=x` and `colour=blue` after `--`: unknown settings \"nadNme\" (did you mean nadName?) and \"colour\"; valid settings are cniNamespace,",
        ),
        (
            kpt("cniVersion: 9.9.9"),
            "error: the argument `cniVersion=9.9.9` after `--`: setting cniVersion: \"9.9.9\" is not a CNI spec version",
        ),
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: function-input\n  namespace: mine\ndata: {nadNme: x}\n".to_string(),
            "error: unknown setting \"nadNme\" (did you mean nadName?); valid settings are",
        ),
    ] {
        let got = dispatch(Takes::Any, &src);
        assert!(got.starts_with(want), "{src}\n{got}");
    }
}
