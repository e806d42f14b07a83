//! `--batteries-included`: optional conveniences a shard sets up for itself.
//!
//! Upstream semantics, kept exactly because kcp-operator and users' `extraArgs` depend on them: a list
//! without prefixes is the whole set; a list where every item carries `+` or `-` is a delta against
//! the defaults (`admin,workspace-types`); mixing both forms, or naming an unknown battery, is an error.

use std::collections::BTreeSet;
use std::fmt;

/// One optional convenience.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Battery {
    /// The admin kubeconfig (and, upstream, the admin token store).
    Admin,
    /// The `metrics-viewer` user and its permissions.
    MetricsViewer,
    /// A non-admin `user` context in the admin kubeconfig.
    User,
    /// The `organization` and `team` workspace types.
    WorkspaceTypes,
}

impl Battery {
    const ALL: [Battery; 4] = [
        Battery::Admin,
        Battery::MetricsViewer,
        Battery::User,
        Battery::WorkspaceTypes,
    ];

    /// The name as the flag spells it.
    pub fn name(self) -> &'static str {
        match self {
            Battery::Admin => "admin",
            Battery::MetricsViewer => "metrics-viewer",
            Battery::User => "user",
            Battery::WorkspaceTypes => "workspace-types",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|battery| battery.name() == name)
    }
}

/// Why a `--batteries-included` value is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatteriesError {
    #[error("unknown battery {name:?} (known: admin, metrics-viewer, user, workspace-types)")]
    Unknown { name: String },
    #[error(
        "batteries must either all carry a +/- prefix (a change to the defaults) or none (the full set); got {values:?}"
    )]
    MixedPrefixes { values: Vec<String> },
    #[error("battery user enabled which requires admin as well")]
    UserWithoutAdmin,
}

/// The batteries a shard runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batteries(BTreeSet<Battery>);

impl Default for Batteries {
    fn default() -> Self {
        Batteries(BTreeSet::from([Battery::Admin, Battery::WorkspaceTypes]))
    }
}

impl Batteries {
    /// Resolves the flag's items (already split at commas; empty items are ignored, so
    /// `--batteries-included=` means none).
    pub fn resolve(values: &[String]) -> Result<Self, BatteriesError> {
        let items: Vec<&str> = values
            .iter()
            .map(|value| value.trim())
            .filter(|value| !value.is_empty())
            .collect();
        let prefixed = items
            .iter()
            .filter(|item| item.starts_with(['+', '-']))
            .count();
        if prefixed != 0 && prefixed != items.len() {
            return Err(BatteriesError::MixedPrefixes {
                values: items.iter().map(|item| (*item).to_owned()).collect(),
            });
        }
        let parse = |name: &str| {
            Battery::from_name(name).ok_or_else(|| BatteriesError::Unknown {
                name: name.to_owned(),
            })
        };
        let batteries = if prefixed == 0 {
            items
                .into_iter()
                .map(parse)
                .collect::<Result<_, _>>()
                .map(Batteries)?
        } else {
            let mut batteries = Self::default();
            for item in items {
                let (sign, name) = item.split_at(1);
                let battery = parse(name)?;
                if sign == "+" {
                    batteries.0.insert(battery);
                } else {
                    batteries.0.remove(&battery);
                }
            }
            batteries
        };
        // The user's context lives in the admin kubeconfig, so there is no user without admin.
        if batteries.contains(Battery::User) && !batteries.contains(Battery::Admin) {
            return Err(BatteriesError::UserWithoutAdmin);
        }
        Ok(batteries)
    }

    pub fn contains(&self, battery: Battery) -> bool {
        self.0.contains(&battery)
    }
}

impl fmt::Display for Batteries {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.0.iter().map(|battery| battery.name()).collect();
        f.write_str(&names.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(values: &[&str]) -> Result<String, BatteriesError> {
        let values: Vec<String> = values.iter().map(|value| (*value).to_owned()).collect();
        Batteries::resolve(&values).map(|batteries| batteries.to_string())
    }

    #[test]
    fn unprefixed_list_is_the_whole_set() {
        assert_eq!(resolve(&["workspace-types"]), Ok("workspace-types".into()));
        assert_eq!(
            resolve(&["user", "admin", "metrics-viewer"]),
            Ok("admin,metrics-viewer,user".into())
        );
        assert_eq!(resolve(&[""]), Ok(String::new()));
        assert_eq!(resolve(&[]), Ok(String::new()));
    }

    #[test]
    fn prefixed_list_changes_the_defaults() {
        assert_eq!(resolve(&["+user"]), Ok("admin,user,workspace-types".into()));
        assert_eq!(resolve(&["-admin"]), Ok("workspace-types".into()));
        assert_eq!(
            resolve(&["-workspace-types", "+metrics-viewer", "-admin"]),
            Ok("metrics-viewer".into())
        );
        assert_eq!(resolve(&["+admin"]), Ok("admin,workspace-types".into()));
    }

    #[test]
    fn mixing_and_unknown_names_are_refused() {
        assert_eq!(
            resolve(&["+user", "admin"]),
            Err(BatteriesError::MixedPrefixes {
                values: vec!["+user".into(), "admin".into()]
            })
        );
        assert_eq!(
            resolve(&["cluster-workspace-types"]),
            Err(BatteriesError::Unknown {
                name: "cluster-workspace-types".into()
            })
        );
        assert_eq!(
            resolve(&["-nope"]),
            Err(BatteriesError::Unknown {
                name: "nope".into()
            })
        );
        assert_eq!(resolve(&["user"]), Err(BatteriesError::UserWithoutAdmin));
        assert_eq!(
            resolve(&["+user", "-admin"]),
            Err(BatteriesError::UserWithoutAdmin)
        );
    }
}
