//! How a new project depends on this toolkit, and what it inherits from it.
//!
//! The toolkit's crates (`olmkit-runtime`, and `kube-standin` for tests) are not published, so a
//! project takes them by path (a checkout of the toolkit) or from git. Cargo reads a path or git
//! dependency's own workspace for its `workspace = true` fields, so they build as they are.
//!
//! A new project also starts from the toolkit's `Cargo.lock` (so it resolves to the versions the
//! toolkit was tested with and, built in the same target directory, shares their compiled
//! artifacts; cargo drops what it does not use), its `rust-toolchain.toml`, its build profiles
//! and the version requirements of the dependencies the generated code uses: all embedded here
//! when bundle-tool is built.

use crate::ScaffoldError;

/// The toolkit workspace's manifest.
const MANIFEST: &str = include_str!("../../../../Cargo.toml");
/// The toolkit workspace's lock file: the seed of a new project's.
pub(crate) const LOCK: &str = include_str!("../../../../Cargo.lock");
/// The toolkit's toolchain file.
pub(crate) const RUST_TOOLCHAIN: &str = include_str!("../../../../rust-toolchain.toml");

/// Where a new project's toolkit dependencies come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Toolkit {
    /// A checkout of the toolkit (`--toolkit-path DIR`): path dependencies on
    /// `DIR/bundle-tool/crates/olmkit-runtime` and `DIR/tests/kube-standin`.
    Path(String),
    /// A git repository (`--toolkit-git URL [--toolkit-rev REV]`).
    Git {
        /// The repository URL.
        url: String,
        /// A commit, tag or branch name (`rev = ...`); none: the default branch.
        rev: Option<String>,
    },
}

/// The crate directories inside a toolkit checkout.
pub const RUNTIME_DIR: &str = "bundle-tool/crates/olmkit-runtime";
/// The stand-in's directory inside a toolkit checkout.
pub const STANDIN_DIR: &str = "tests/kube-standin";

/// Whether a `--toolkit-path` is relative (to the project directory, as Cargo reads it).
pub(crate) fn is_relative(root: &str) -> bool {
    !root.starts_with('/')
}

fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
}

impl Toolkit {
    /// The dependency specification (inline table body) of a toolkit crate at `dir`.
    fn spec(&self, dir: &str) -> String {
        match self {
            Toolkit::Path(root) => {
                let root = root.trim_end_matches('/');
                format!("path = {}", toml_string(&format!("{root}/{dir}")))
            }
            Toolkit::Git { url, rev } => match rev {
                Some(rev) => format!("git = {}, rev = {}", toml_string(url), toml_string(rev)),
                None => format!("git = {}", toml_string(url)),
            },
        }
    }

    /// `olmkit-runtime = { ... }` of the workspace dependencies.
    pub(crate) fn runtime_line(&self) -> String {
        format!(
            "olmkit-runtime = {{ {}, default-features = false }}",
            self.spec(RUNTIME_DIR)
        )
    }

    /// `kube-standin = { ... }` of the workspace dependencies.
    pub(crate) fn standin_line(&self) -> String {
        format!("kube-standin = {{ {} }}", self.spec(STANDIN_DIR))
    }

    /// One line for READMEs and comments: where the toolkit comes from.
    pub(crate) fn describe(&self) -> String {
        match self {
            Toolkit::Path(root) if is_relative(root) => format!(
                "the toolkit checkout at {root}, relative to this directory (path dependencies)"
            ),
            Toolkit::Path(root) => format!("the toolkit checkout at {root} (path dependencies)"),
            Toolkit::Git {
                url,
                rev: Some(rev),
            } => format!("{url} at {rev} (git dependencies)"),
            Toolkit::Git { url, rev: None } => {
                format!("{url}, default branch (git dependencies)")
            }
        }
    }
}

/// The `[workspace.dependencies]` entry of `name` in the toolkit's manifest (everything after
/// `=`), so that a new project asks for exactly the versions and features the toolkit uses.
pub(crate) fn dependency(name: &str) -> Result<String, ScaffoldError> {
    let mut in_section = false;
    for line in MANIFEST.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            in_section = t == "[workspace.dependencies]";
            continue;
        }
        if !in_section {
            continue;
        }
        if let Some((key, value)) = t.split_once('=')
            && key.trim() == name
        {
            return Ok(value.trim().to_string());
        }
    }
    Err(ScaffoldError::Internal(format!(
        "the toolkit's Cargo.toml has no workspace dependency {name:?}"
    )))
}

/// The packages a project that depends on `roots` may build: their closure in the toolkit's
/// lock file (every dependency the toolkit's builds resolved, features aside).
fn closure(roots: &[&str]) -> std::collections::BTreeSet<String> {
    let mut deps: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for block in LOCK.split("[[package]]").skip(1) {
        let mut name = None;
        let mut list = Vec::new();
        let mut in_deps = false;
        for line in block.lines() {
            if let Some(n) = line.strip_prefix("name = ") {
                name = Some(n.trim_matches('"').to_string());
            } else if line.starts_with("dependencies = [") {
                in_deps = true;
            } else if in_deps && line.starts_with(']') {
                in_deps = false;
            } else if in_deps {
                let dep = line.trim().trim_end_matches(',').trim_matches('"');
                list.push(dep.split(' ').next().unwrap_or(dep).to_string());
            }
        }
        if let Some(n) = name {
            deps.entry(n).or_default().extend(list);
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut stack: Vec<String> = roots.iter().map(|r| r.to_string()).collect();
    while let Some(n) = stack.pop() {
        if seen.insert(n.clone()) {
            stack.extend(deps.get(&n).cloned().unwrap_or_default());
        }
    }
    seen
}

/// Per-package optimisations of the toolkit's that a project does not inherit. They serve the
/// toolkit's own tests (every bundle it validates compiles OLM's 800 KB CSV schema; the
/// operator's webhook load tests push millions of objects through olmkit-runtime), not a
/// project's, whose first build they would slow (jsonschema at `opt-level = 2`: 91
/// CPU-seconds against 13 unoptimised, measured on 2026-11-29); and they could not share
/// artifacts with the toolkit's anyway: a project builds these crates over other dependency
/// features.
const NOT_INHERITED: [&str; 3] = ["jsonschema", "referencing", "olmkit-runtime"];

/// The toolkit's `[profile.*]` sections (same settings, same compiled artifacts), without the
/// per-package overrides of packages a project on `roots` never builds (cargo warns about
/// those) and of [`NOT_INHERITED`].
pub(crate) fn profiles(roots: &[&str]) -> String {
    let start = MANIFEST
        .find("\n[profile.")
        .map(|i| i + 1)
        .unwrap_or(MANIFEST.len());
    let used = closure(roots);
    let mut out: Vec<&str> = Vec::new();
    // Comments and blank lines go with the section after them.
    let mut pending: Vec<&str> = Vec::new();
    let mut keep = true;
    for line in MANIFEST[start..].lines() {
        let t = line.trim();
        if t.starts_with('[') {
            keep = match t
                .trim_matches(|c| c == '[' || c == ']')
                .split_once(".package.")
            {
                // `"*"` (every dependency) must be the toolkit's too: a project that differs
                // there shares none of the toolkit's compiled dependencies.
                Some((_, "\"*\"")) => true,
                Some((_, package)) => used.contains(package) && !NOT_INHERITED.contains(&package),
                None => true,
            };
            if keep {
                out.append(&mut pending);
                out.push(line);
            }
            pending.clear();
        } else if t.is_empty() || t.starts_with('#') {
            pending.push(line);
        } else if keep {
            out.append(&mut pending);
            out.push(line);
        }
    }
    let text = out.join("\n");
    let text = text.trim_end();
    if text.is_empty() {
        String::new()
    } else {
        format!("{text}\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_toolkits_requirements() {
        assert!(dependency("kube").unwrap().contains("version = \"5"));
        assert!(dependency("k8s-openapi").unwrap().contains("schemars"));
        assert!(dependency("nope").is_err());
        let p = profiles(&["olmkit-runtime"]);
        assert!(p.starts_with("[profile.dev]"), "{p}");
        assert!(p.contains("[profile.dev.package.sha2]"), "{p}");
        assert!(!p.contains("zlib-rs"), "{p}");
        assert!(p.contains("[profile.dev.package.serde-saphyr]"), "{p}");
        assert!(
            p.contains("[profile.dev.package.\"*\"]\ndebug = false"),
            "{p}"
        );
        for not_inherited in NOT_INHERITED {
            assert!(!p.contains(not_inherited), "{p}");
        }
        assert!(LOCK.contains("name = \"kube-runtime\""));
        assert!(RUST_TOOLCHAIN.contains("channel"));
    }

    #[test]
    fn dependency_lines() {
        let p = Toolkit::Path("/src/olmkit/".into());
        assert_eq!(
            p.runtime_line(),
            "olmkit-runtime = { path = \"/src/olmkit/bundle-tool/crates/olmkit-runtime\", default-features = false }"
        );
        let r = Toolkit::Path("../../..".into());
        assert_eq!(
            r.standin_line(),
            "kube-standin = { path = \"../../../tests/kube-standin\" }"
        );
        assert!(r.describe().contains("relative to this directory"));
        let g = Toolkit::Git {
            url: "https://example.com/olmkit.git".into(),
            rev: Some("v0.5.0".into()),
        };
        assert_eq!(
            g.standin_line(),
            "kube-standin = { git = \"https://example.com/olmkit.git\", rev = \"v0.5.0\" }"
        );
    }
}
