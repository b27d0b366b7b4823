//! Number and size formatting shared by the analyses' messages and the CLI
//! tables: thousands separators as the seeds print them (`1,048,576`), sizes as
//! `16×16×1`, percentages with one decimal.

/// `1048576` → `"1,048,576"`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `[16, 16, 1]` → `"16×16×1"`.
pub fn dims(d: [u32; 3]) -> String {
    format!("{}×{}×{}", d[0], d[1], d[2])
}

/// `[32, 16]` → `"32×16"`.
pub fn dims2(d: [u32; 2]) -> String {
    format!("{}×{}", d[0], d[1])
}

/// A float with `decimals` decimals and thousands separators in the integer
/// part: `(51.2, 1)` → `"51.2"`, `(262144.0, 0)` → `"262,144"`.
pub fn number(x: f64, decimals: usize) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    let s = format!("{:.*}", decimals, x.abs());
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i.to_string(), Some(f.to_string())),
        None => (s.clone(), None),
    };
    let grouped = match int.parse::<u64>() {
        Ok(v) => thousands(v),
        Err(_) => int,
    };
    let sign = if x < 0.0 && s.chars().any(|c| c.is_ascii_digit() && c != '0') { "-" } else { "" };
    match frac {
        Some(f) => format!("{sign}{grouped}.{f}"),
        None => format!("{sign}{grouped}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_thousands() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_048_576), "1,048,576");
        assert_eq!(number(262_144.0, 0), "262,144");
        assert_eq!(number(51.2, 1), "51.2");
        assert_eq!(number(-1234.5, 1), "-1,234.5");
        assert_eq!(dims([16, 16, 1]), "16×16×1");
    }
}
