//! Editing scaffolded files that are yours through marker comments, like kubebuilder's
//! `+kubebuilder:scaffold:` markers: `create api` inserts its lines just above a line holding
//! `+olmkit:scaffold:<name>` (`// +olmkit:scaffold:kinds` in Rust, `# +olmkit:scaffold:...` in
//! YAML), indented like the marker, and leaves everything else in the file as it is. Keep the
//! markers where they are when you edit those files; one that is gone is an error naming the
//! file and the marker.

use crate::ScaffoldError;

/// The text that marks an insertion point named `name`.
pub fn marker(name: &str) -> String {
    format!("+olmkit:scaffold:{name}")
}

/// Whether a line is a comment holding exactly the marker.
fn is_marker_line(line: &str, name: &str) -> bool {
    let t = line.trim();
    let body = t
        .strip_prefix("//")
        .or_else(|| t.strip_prefix('#'))
        .map(str::trim);
    body == Some(marker(name).as_str())
}

/// Inserts `snippet` (lines without indentation) above the marker `name` of `file` (its text
/// is `text`). Unchanged when the snippet is already right above the marker, so running the
/// same edit twice changes nothing.
pub fn insert(file: &str, text: &str, name: &str, snippet: &str) -> Result<String, ScaffoldError> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let at: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| is_marker_line(l, name))
        .map(|(i, _)| i)
        .collect();
    let index = match at.as_slice() {
        [i] => *i,
        [] => {
            return Err(ScaffoldError::MissingMarker {
                file: file.to_string(),
                marker: marker(name),
            });
        }
        _ => {
            return Err(ScaffoldError::DuplicateMarker {
                file: file.to_string(),
                marker: marker(name),
            });
        }
    };
    let marker_line = lines[index];
    let indent = &marker_line[..marker_line.len() - marker_line.trim_start().len()];
    let block: Vec<String> = snippet
        .lines()
        .map(|l| {
            if l.is_empty() {
                String::new()
            } else {
                format!("{indent}{l}")
            }
        })
        .collect();
    // Already there, right above the marker?
    if block.len() <= index {
        let above: Vec<&str> = lines[index - block.len()..index]
            .iter()
            .map(|l| l.trim_end_matches('\n'))
            .collect();
        if above == block.iter().map(String::as_str).collect::<Vec<_>>() {
            return Ok(text.to_string());
        }
    }
    let mut out = String::with_capacity(text.len() + snippet.len() + 64);
    for l in &lines[..index] {
        out.push_str(l);
    }
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    for l in &block {
        out.push_str(l);
        out.push('\n');
    }
    for l in &lines[index..] {
        out.push_str(l);
    }
    Ok(out)
}

/// Whether `text` holds the marker `name`.
pub fn has_marker(text: &str, name: &str) -> bool {
    text.lines().any(|l| is_marker_line(l, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIB: &str = "pub mod a;\n// +olmkit:scaffold:kinds\n\npub fn crds() -> Vec<u8> {\n    vec![\n        a::crd(),\n        // +olmkit:scaffold:crds\n    ]\n}\n";

    #[test]
    fn inserts_above_the_marker_with_its_indentation() {
        let once = insert("src/lib.rs", LIB, "crds", "b::crd(),").unwrap();
        assert!(
            once.contains(
                "        a::crd(),\n        b::crd(),\n        // +olmkit:scaffold:crds\n"
            ),
            "{once}"
        );
        let twice = insert("src/lib.rs", &once, "kinds", "pub mod b;").unwrap();
        assert!(
            twice.starts_with("pub mod a;\npub mod b;\n// +olmkit:scaffold:kinds\n"),
            "{twice}"
        );
    }

    #[test]
    fn the_same_edit_twice_changes_nothing() {
        let once = insert("src/lib.rs", LIB, "crds", "b::crd(),").unwrap();
        assert_eq!(
            insert("src/lib.rs", &once, "crds", "b::crd(),").unwrap(),
            once
        );
    }

    #[test]
    fn multi_line_snippets_keep_blank_lines_unindented() {
        let yaml = "resources:\n- a.yaml\n# +olmkit:scaffold:crdkustomizeresource\n";
        let out = insert(
            "config/crd/kustomization.yaml",
            yaml,
            "crdkustomizeresource",
            "- b.yaml\n\n- c.yaml",
        )
        .unwrap();
        assert_eq!(
            out,
            "resources:\n- a.yaml\n- b.yaml\n\n- c.yaml\n# +olmkit:scaffold:crdkustomizeresource\n"
        );
    }

    #[test]
    fn missing_and_duplicate_markers_name_the_file() {
        let e = insert("src/lib.rs", "fn main() {}\n", "kinds", "x").unwrap_err();
        assert_eq!(
            e.to_string(),
            "src/lib.rs: the marker comment `+olmkit:scaffold:kinds` is missing"
        );
        let two = "// +olmkit:scaffold:kinds\n// +olmkit:scaffold:kinds\n";
        assert!(matches!(
            insert("src/lib.rs", two, "kinds", "x"),
            Err(ScaffoldError::DuplicateMarker { .. })
        ));
        // A marker mentioned in prose is not a marker.
        assert!(!has_marker(
            "// see +olmkit:scaffold:kinds below\n",
            "kinds"
        ));
    }
}
