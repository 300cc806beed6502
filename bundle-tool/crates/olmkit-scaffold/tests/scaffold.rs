//! What `init` and `create api` generate for fixed flags (insta snapshots, one per scenario,
//! every file listed with its action), that the same flags give the same bytes, that the Rust
//! they write is laid out as rustfmt would, and how they refuse flags that do not fit.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;

use olmkit_scaffold::{
    ChangeKind, CreateApiOptions, DeployImage, GeneratedFile, InitOptions, Project, ScaffoldError,
    Toolkit, create_api, init,
};

fn init_options() -> InitOptions {
    InitOptions {
        domain: "example.com".into(),
        project_name: "whalesay-operator".into(),
        repo: Some("github.com/example/whalesay-operator".into()),
        toolkit: Toolkit::Git {
            url: "https://example.com/olmkit.git".into(),
            rev: Some("v0.1.0".into()),
        },
    }
}

fn api(group: &str, version: &str, kind: &str) -> CreateApiOptions {
    CreateApiOptions {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        plural: None,
        short_names: vec![],
        namespaced: None,
        resource: true,
        controller: true,
        storage: false,
        deploy_image: None,
    }
}

fn whalesay() -> CreateApiOptions {
    CreateApiOptions {
        short_names: vec!["ws".into()],
        deploy_image: Some(DeployImage {
            image: "docker.io/library/busybox:1.36".into(),
            command: Some("sleep,infinity".into()),
            port: Some(8080),
            run_as_user: Some(1001),
        }),
        ..api("demo", "v1alpha1", "Whalesay")
    }
}

/// A project on disk, in memory.
#[derive(Clone)]
struct Tree(BTreeMap<String, String>);

impl Tree {
    fn init() -> Tree {
        Tree(
            init(&init_options())
                .unwrap()
                .into_iter()
                .map(|f| (f.path, f.contents))
                .collect(),
        )
    }

    fn project(&self) -> Project {
        Project::parse(&self.0["PROJECT"]).unwrap()
    }

    /// Runs create api and applies its changes; returns them as a listing.
    fn create(&mut self, options: &CreateApiOptions) -> Result<String, ScaffoldError> {
        let changes = create_api(&self.project(), &self.0, options)?;
        let mut listing = String::new();
        for n in &changes.notes {
            listing.push_str(&format!("note: {n}\n"));
        }
        for c in changes.files {
            let action = match c.kind {
                ChangeKind::Create => "create",
                ChangeKind::Update => "update",
            };
            listing.push_str(&format!(
                "=== {action} {}\n{}",
                c.file.path, c.file.contents
            ));
            self.0.insert(c.file.path, c.file.contents);
        }
        Ok(listing)
    }
}

/// Files too large or too toolkit-specific for a snapshot (what comes from the toolkit's own
/// Cargo.toml changes with it; `toolkit.rs` tests that part).
fn redact(f: &GeneratedFile) -> String {
    match f.path.as_str() {
        "Cargo.lock" => "<the toolkit's Cargo.lock>\n".into(),
        "rust-toolchain.toml" => "<the toolkit's rust-toolchain.toml>\n".into(),
        "Cargo.toml" => {
            let text = &f.contents;
            let deps = text.find("# The versions the toolkit uses").unwrap();
            let package = text.find("\n[package]").unwrap();
            let profiles = text.find("# The toolkit's build profiles").unwrap();
            format!(
                "{}<the toolkit's version requirements>\n{}<the toolkit's profiles>\n",
                &text[..deps],
                &text[package..profiles]
            )
        }
        _ => f.contents.clone(),
    }
}

#[test]
fn init_snapshot() {
    let files = init(&init_options()).unwrap();
    let listing: String = files
        .iter()
        .map(|f| format!("=== {}\n{}", f.path, redact(f)))
        .collect();
    insta::assert_snapshot!(listing);
}

#[test]
fn create_api_deploy_image_snapshot() {
    let mut tree = Tree::init();
    insta::assert_snapshot!(tree.create(&whalesay()).unwrap());
}

#[test]
fn create_api_plain_snapshot() {
    let mut tree = Tree::init();
    insta::assert_snapshot!(tree.create(&api("notes", "v1", "Note")).unwrap());
}

#[test]
fn create_api_second_version_snapshot() {
    let mut tree = Tree::init();
    tree.create(&whalesay()).unwrap();
    insta::assert_snapshot!(tree.create(&api("demo", "v1", "Whalesay")).unwrap());
}

#[test]
fn create_api_new_storage_version_snapshot() {
    let mut tree = Tree::init();
    tree.create(&whalesay()).unwrap();
    tree.create(&api("demo", "v1beta1", "Whalesay")).unwrap();
    let storage = CreateApiOptions {
        storage: true,
        ..api("demo", "v1", "Whalesay")
    };
    insta::assert_snapshot!(tree.create(&storage).unwrap());
}

#[test]
fn same_flags_same_bytes() {
    let run = || {
        let mut tree = Tree::init();
        tree.create(&whalesay()).unwrap();
        tree.create(&api("notes", "v1", "Note")).unwrap();
        tree.create(&api("demo", "v1", "Whalesay")).unwrap();
        tree.0
    };
    assert_eq!(run(), run());
}

#[test]
fn a_second_deploy_image_kind_shares_the_deployments_row() {
    let mut tree = Tree::init();
    tree.create(&whalesay()).unwrap();
    let busybox = CreateApiOptions {
        deploy_image: Some(DeployImage {
            image: "busybox:1.36".into(),
            command: None,
            port: None,
            run_as_user: None,
        }),
        ..api("demo", "v1alpha1", "Busybox")
    };
    tree.create(&busybox).unwrap();
    let rbac = &tree.0["src/rbac.rs"];
    assert_eq!(
        rbac.matches("resource: \"deployments\"").count(),
        1,
        "{rbac}"
    );
    assert!(
        rbac.contains("resource: \"busyboxes/finalizers\""),
        "{rbac}"
    );
    // Modules stay sorted (rustfmt sorts them).
    let lib = &tree.0["whalesay-api/src/lib.rs"];
    assert!(
        lib.contains("pub mod busybox;\npub mod whalesay;\n"),
        "{lib}"
    );
    let e2e = &tree.0["tests/e2e.rs"];
    assert!(
        e2e.contains("    mod busybox;\n    mod whalesay;\n"),
        "{e2e}"
    );
    let env = &tree.0["config/manager/manager.yaml"];
    assert!(env.contains("- name: WHALESAY_IMAGE\n") && env.contains("- name: BUSYBOX_IMAGE\n"));
    // The in-process role has every row once.
    let role = &tree.0["config/rbac/role.yaml"];
    assert_eq!(role.matches("- deployments\n").count(), 1, "{role}");
}

#[test]
fn cluster_scoped_and_api_only_kinds() {
    let mut tree = Tree::init();
    let board = CreateApiOptions {
        namespaced: Some(false),
        ..api("notes", "v1", "Board")
    };
    tree.create(&board).unwrap();
    let version = &tree.0["whalesay-api/src/board/v1.rs"];
    assert!(!version.contains("namespaced"), "{version}");
    let controllers = &tree.0["src/controller/mod.rs"];
    assert!(
        controllers.contains("controllers.spawn(board::run(ctx.clone(), None, stop.clone()));")
    );
    let tag = CreateApiOptions {
        controller: false,
        ..api("notes", "v1", "Tag")
    };
    let listing = tree.create(&tag).unwrap();
    assert!(!listing.contains("src/controller/tag.rs"), "{listing}");
    assert!(!tree.0["src/rbac.rs"].contains("\"tags\""));
    // A controller added later for it (kubebuilder's --resource=false).
    let controller_only = CreateApiOptions {
        resource: false,
        ..api("notes", "v1", "Tag")
    };
    let listing = tree.create(&controller_only).unwrap();
    assert!(
        listing.contains("=== create src/controller/tag.rs"),
        "{listing}"
    );
    assert!(!listing.contains("whalesay-api/src/tag/v1.rs"), "{listing}");
    assert!(
        tree.project()
            .resources
            .iter()
            .any(|r| r.kind == "Tag" && r.controller)
    );
}

fn refusal(tree: &Tree, options: &CreateApiOptions) -> (String, String) {
    let e = create_api(&tree.project(), &tree.0, options).unwrap_err();
    let flag = match &e {
        ScaffoldError::InvalidFlag { flag, .. } | ScaffoldError::Conflict { flag, .. } => {
            flag.to_string()
        }
        ScaffoldError::MissingMarker { file, .. } => file.clone(),
        other => format!("{other:?}"),
    };
    (flag, e.to_string())
}

#[test]
fn flags_that_do_not_fit_are_refused_by_name() {
    let mut tree = Tree::init();
    tree.create(&whalesay()).unwrap();
    let cases: Vec<(CreateApiOptions, &str)> = vec![
        (whalesay(), "--image"),
        (api("demo", "v1alpha1", "Whalesay"), "--version"),
        (api("other", "v1", "Whalesay"), "--kind"),
        (api("demo", "v1", "whalesay"), "--kind"),
        (api("demo", "1", "Note"), "--version"),
        (api("Demo", "v1", "Note"), "--group"),
        (
            CreateApiOptions {
                storage: true,
                ..api("demo", "v1", "Note")
            },
            "--storage",
        ),
        (
            CreateApiOptions {
                resource: false,
                ..api("demo", "v1", "Note")
            },
            "--resource",
        ),
        (
            CreateApiOptions {
                resource: false,
                controller: false,
                ..api("demo", "v1", "Note")
            },
            "--resource",
        ),
        (
            CreateApiOptions {
                namespaced: Some(false),
                ..api("demo", "v1", "Whalesay")
            },
            "--namespaced",
        ),
        (
            CreateApiOptions {
                plural: Some("whales".into()),
                ..api("demo", "v1", "Whalesay")
            },
            "--plural",
        ),
        (
            CreateApiOptions {
                namespaced: Some(false),
                ..whalesay_named("Cowsay")
            },
            "--namespaced",
        ),
        (
            CreateApiOptions {
                controller: false,
                ..whalesay_named("Cowsay")
            },
            "--image",
        ),
    ];
    for (options, flag) in cases {
        let (got, message) = refusal(&tree, &options);
        assert_eq!(got, flag, "{message}");
        assert!(message.starts_with(flag), "{message}");
    }
}

fn whalesay_named(kind: &str) -> CreateApiOptions {
    CreateApiOptions {
        kind: kind.into(),
        ..whalesay()
    }
}

#[test]
fn a_missing_marker_names_the_file() {
    let mut tree = Tree::init();
    let lib = tree.0["whalesay-api/src/lib.rs"].replace("// +olmkit:scaffold:crds\n", "");
    tree.0.insert("whalesay-api/src/lib.rs".into(), lib);
    let (file, message) = refusal(&tree, &api("notes", "v1", "Note"));
    assert_eq!(file, "whalesay-api/src/lib.rs");
    assert_eq!(
        message,
        "whalesay-api/src/lib.rs: the marker comment `+olmkit:scaffold:crds` is missing"
    );
}

#[test]
fn init_refuses_bad_names() {
    let bad = |f: fn(&mut InitOptions)| {
        let mut o = init_options();
        f(&mut o);
        init(&o).unwrap_err().to_string()
    };
    assert!(bad(|o| o.domain = "Example.com".into()).starts_with("--domain \"Example.com\""));
    assert!(bad(|o| o.project_name = "Whalesay".into()).starts_with("--project-name"));
    assert!(bad(|o| o.repo = Some("a b".into())).starts_with("--repo"));
}

/// The generated Rust is rustfmt-clean as generated, for these names (bundle-tool also runs
/// rustfmt on what it writes, for names long enough to change the layout).
#[test]
fn generated_rust_is_rustfmt_clean() {
    let rustfmt_ok = std::process::Command::new("rustfmt")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !rustfmt_ok {
        eprintln!("rustfmt not found; skipped");
        return;
    }
    let mut tree = Tree::init();
    tree.create(&whalesay()).unwrap();
    tree.create(&api("notes", "v1", "Note")).unwrap();
    // deploy-image with only --image: no port, command or user (nothing unused is imported).
    tree.create(&CreateApiOptions {
        deploy_image: Some(DeployImage {
            image: "docker.io/library/redis:7.2".into(),
            command: None,
            port: None,
            run_as_user: None,
        }),
        ..api("cache", "v1", "Redis")
    })
    .unwrap();
    tree.create(&api("demo", "v1", "Whalesay")).unwrap();
    tree.create(&CreateApiOptions {
        storage: true,
        ..api("demo", "v2", "Whalesay")
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in &tree.0 {
        let target = dir.path().join(path);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::write(&target, text).unwrap();
    }
    let rs: Vec<&String> = tree.0.keys().filter(|p| p.ends_with(".rs")).collect();
    let out = std::process::Command::new("rustfmt")
        .args(["--edition", "2024", "--check"])
        .args(rs.iter().map(Path::new))
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
