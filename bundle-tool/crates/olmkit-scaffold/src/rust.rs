//! Small helpers that lay out generated Rust the way rustfmt (default settings) would, so that a
//! scaffolded project passes `cargo fmt --check` as generated.

/// rustfmt's `array_width`, `chain_width` and `fn_call_width` defaults.
const WIDTH: usize = 60;

/// `prefix[a, b]` on one line when the list is short, else one item per line (trailing comma),
/// indented from `indent`.
pub fn list(indent: &str, prefix: &str, items: &[String]) -> String {
    let one = format!("{prefix}[{}]", items.join(", "));
    if one.len() - prefix.len() <= WIDTH && indent.len() + one.len() <= 100 {
        return one;
    }
    let mut out = format!("{prefix}[\n");
    for item in items {
        out.push_str(&format!("{indent}    {item},\n"));
    }
    out.push_str(&format!("{indent}]"));
    out
}

/// `head.a().b()` on one line when short, else one call per line.
pub fn chain(indent: &str, head: &str, calls: &[String]) -> String {
    let one = format!("{head}{}", calls.concat());
    if calls.is_empty() || (one.len() <= WIDTH && indent.len() + one.len() <= 100) {
        return one;
    }
    let mut out = head.to_string();
    for call in calls {
        out.push_str(&format!("\n{indent}    {call}"));
    }
    out
}

/// A Rust string literal.
pub fn string(s: &str) -> String {
    format!("{s:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_lists_stay_on_one_line() {
        let items = vec!["a::crd()".to_string(), "b::crd()".to_string()];
        assert_eq!(list("    ", "vec!", &items), "vec![a::crd(), b::crd()]");
        let long: Vec<String> = (0..4)
            .map(|i| format!("version{i}::Whalesay::crd()"))
            .collect();
        assert_eq!(
            list("    ", "vec!", &long[..3]),
            "vec![\n        version0::Whalesay::crd(),\n        version1::Whalesay::crd(),\n        version2::Whalesay::crd(),\n    ]"
        );
    }

    #[test]
    fn long_chains_break() {
        let calls = vec![".spoke::<v1alpha1::Whalesay>()".to_string()];
        assert_eq!(
            chain("    ", "HubAndSpoke::new()", &calls),
            "HubAndSpoke::new().spoke::<v1alpha1::Whalesay>()"
        );
        let calls = vec![
            ".spoke::<v1alpha1::Whalesay>()".to_string(),
            ".spoke::<v1beta1::Whalesay>()".to_string(),
        ];
        assert_eq!(
            chain("    ", "HubAndSpoke::new()", &calls),
            "HubAndSpoke::new()\n        .spoke::<v1alpha1::Whalesay>()\n        .spoke::<v1beta1::Whalesay>()"
        );
    }
}
