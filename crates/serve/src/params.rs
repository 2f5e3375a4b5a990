//! Query parameters, checked: numbers in range, strings of bounded length, errors that name the
//! parameter and say what is accepted.

/// A parameter that is missing or wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    /// A required parameter is absent.
    #[error("missing parameter {0}")]
    Missing(String),
    /// A parameter's value is not accepted: the parameter and why.
    #[error("parameter {0}: {1}")]
    Invalid(String, String),
}

/// The query parameters of a request.
#[derive(Debug, Clone, Default)]
pub struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    /// Parameters from decoded pairs.
    pub fn new(pairs: Vec<(String, String)>) -> Params {
        Params { pairs }
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// An integer in `min..=max`; an absent or empty value is `None` (the write-up's `hours=`).
    pub fn int(&self, name: &str, min: i64, max: i64) -> Result<Option<i64>, ParamError> {
        match self.get(name).map(str::trim) {
            None | Some("") => Ok(None),
            Some(v) => match v.parse::<i64>() {
                Ok(n) if (min..=max).contains(&n) => Ok(Some(n)),
                _ => Err(ParamError::Invalid(
                    name.into(),
                    format!("'{}' is not an integer from {min} to {max}", short(v)),
                )),
            },
        }
    }

    /// A string of at most `max_chars` characters; absent is `None`.
    pub fn str(&self, name: &str, max_chars: usize) -> Result<Option<String>, ParamError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) if v.chars().count() > max_chars => {
                Err(ParamError::Invalid(name.into(), format!("longer than {max_chars} characters")))
            }
            Some(v) => Ok(Some(v.to_string())),
        }
    }

    /// A flag: `1`/`true`/`yes`/`on` or `0`/`false`/`no`/`off`/empty; absent is `false`.
    pub fn flag(&self, name: &str) -> Result<bool, ParamError> {
        match self.get(name) {
            None | Some("" | "0" | "false" | "no" | "off") => Ok(false),
            Some("1" | "true" | "yes" | "on") => Ok(true),
            Some(v) => Err(ParamError::Invalid(name.into(), format!("'{}' is not 1 or 0", short(v)))),
        }
    }

    /// A duration with a unit (`1us`, `10s`; a bare number is ns) in `min..=max` ns.
    pub fn duration_ns(&self, name: &str, min: u64, max: u64) -> Result<Option<u64>, ParamError> {
        match self.get(name).map(str::trim) {
            None | Some("") => Ok(None),
            Some(v) => match latscope_event::units::parse_duration_ns(v) {
                Ok(n) if (min..=max).contains(&n) => Ok(Some(n)),
                Ok(_) => Err(ParamError::Invalid(
                    name.into(),
                    format!(
                        "{} is out of range ({} to {})",
                        short(v),
                        latscope_event::units::fmt_ns(min),
                        latscope_event::units::fmt_ns(max)
                    ),
                )),
                Err(e) => Err(ParamError::Invalid(name.into(), e)),
            },
        }
    }
}

/// At most 40 characters of a value, for messages.
fn short(v: &str) -> String {
    if v.chars().count() <= 40 {
        v.to_string()
    } else {
        format!("{}…", v.chars().take(40).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_checked() {
        let p = Params::new(
            [("a", "12"), ("b", ""), ("c", "x"), ("d", "999"), ("s", "héllo"), ("f", "1"), ("t", "10ms")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        assert_eq!(p.int("a", 0, 100), Ok(Some(12)));
        assert_eq!(p.int("b", 0, 100), Ok(None));
        assert_eq!(p.int("zz", 0, 100), Ok(None));
        assert!(p.int("c", 0, 100).unwrap_err().to_string().contains("parameter c"));
        assert!(p.int("d", 0, 100).is_err());
        assert_eq!(p.str("s", 5), Ok(Some("héllo".into())));
        assert!(p.str("s", 4).is_err());
        assert_eq!(p.flag("f"), Ok(true));
        assert_eq!(p.flag("zz"), Ok(false));
        assert!(p.flag("s").is_err());
        assert_eq!(p.duration_ns("t", 1, u64::MAX), Ok(Some(10_000_000)));
        assert!(p.duration_ns("t", 1, 1000).is_err());
    }
}
