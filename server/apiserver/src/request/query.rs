//! Query parameters of list, watch, write and delete requests, parsed and checked once.
//!
//! Bad parameters are the client's fault and must come back as `400 BadRequest` Statuses with the
//! message kube-apiserver would give, never as a default silently applied.

use std::collections::HashMap;

use kcp_apimachinery::ApiError;
use kcp_apimachinery::fields::FieldSelector;
use kcp_apimachinery::labels::LabelSelector;

/// The raw query string as a map. A repeated key keeps its first value, as Go's `url.Values.Get` does.
#[derive(Debug, Default, Clone)]
pub struct Query(HashMap<String, String>);

impl Query {
    pub fn parse(raw: Option<&str>) -> Query {
        let mut map = HashMap::new();
        for (k, v) in form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
            map.entry(k.into_owned()).or_insert_with(|| v.into_owned());
        }
        Query(map)
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    fn bool(&self, key: &str) -> Result<bool, ApiError> {
        match self.get(key) {
            None | Some("") | Some("false") | Some("0") => Ok(false),
            Some("true") | Some("1") => Ok(true),
            Some(other) => Err(ApiError::bad_request(&format!(
                "invalid value {other:?} for {key}: must be a boolean"
            ))),
        }
    }

    fn int(&self, key: &str) -> Result<Option<i64>, ApiError> {
        match self.get(key) {
            None | Some("") => Ok(None),
            Some(v) => v.parse::<i64>().map(Some).map_err(|_| {
                ApiError::bad_request(&format!(
                    "invalid value {v:?} for {key}: must be an integer"
                ))
            }),
        }
    }

    /// `watch=true|1`, used before the request info is computed.
    pub fn is_watch(&self) -> bool {
        matches!(self.get("watch"), Some("true") | Some("1"))
    }
}

/// `resourceVersionMatch` of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceVersionMatch {
    NotOlderThan,
    Exact,
}

/// The options of list and watch requests (metav1.ListOptions).
#[derive(Debug, Clone)]
pub struct ListOptions {
    pub label_selector: LabelSelector,
    pub field_selector: FieldSelector,
    pub limit: usize,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<ResourceVersionMatch>,
    pub allow_watch_bookmarks: bool,
    pub timeout_seconds: Option<u64>,
    pub send_initial_events: Option<bool>,
}

impl ListOptions {
    pub fn parse(query: &Query) -> Result<ListOptions, ApiError> {
        let label_selector = LabelSelector::parse(query.get("labelSelector").unwrap_or(""))
            .map_err(|e| ApiError::bad_request(&e.to_string()))?;
        let field_selector = FieldSelector::parse(query.get("fieldSelector").unwrap_or(""))
            .map_err(|e| ApiError::bad_request(&e.to_string()))?;
        let limit = match query.int("limit")? {
            Some(n) if n < 0 => {
                return Err(ApiError::bad_request(
                    "limit must be a non-negative integer",
                ));
            }
            Some(n) => n as usize,
            None => 0,
        };
        let resource_version = query
            .get("resourceVersion")
            .filter(|v| !v.is_empty())
            .map(str::to_string);
        let resource_version_match = match query.get("resourceVersionMatch") {
            None | Some("") => None,
            Some("NotOlderThan") => Some(ResourceVersionMatch::NotOlderThan),
            Some("Exact") => Some(ResourceVersionMatch::Exact),
            Some(other) => {
                return Err(ApiError::bad_request(&format!(
                    "resourceVersionMatch: Unsupported value: {other:?}: supported values: \"Exact\", \"NotOlderThan\""
                )));
            }
        };
        let continue_token = query
            .get("continue")
            .filter(|v| !v.is_empty())
            .map(str::to_string);
        if continue_token.is_some() && resource_version.as_deref().is_some_and(|rv| rv != "0") {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        if resource_version_match.is_some() && resource_version.is_none() {
            return Err(ApiError::bad_request(
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if resource_version_match.is_some() && continue_token.is_some() {
            return Err(ApiError::bad_request(
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        let timeout_seconds = match query.int("timeoutSeconds")? {
            Some(n) if n < 0 => {
                return Err(ApiError::bad_request("timeoutSeconds must be non-negative"));
            }
            other => other.map(|n| n as u64),
        };
        let send_initial_events = match query.get("sendInitialEvents") {
            None | Some("") => None,
            Some(_) => Some(query.bool("sendInitialEvents")?),
        };
        Ok(ListOptions {
            label_selector,
            field_selector,
            limit,
            continue_token,
            resource_version,
            resource_version_match,
            allow_watch_bookmarks: query.bool("allowWatchBookmarks")?,
            timeout_seconds,
            send_initial_events,
        })
    }
}

/// Options of create, update and patch (metav1.CreateOptions/UpdateOptions/PatchOptions).
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    pub dry_run: bool,
    pub field_manager: Option<String>,
    pub force: bool,
}

impl WriteOptions {
    pub fn parse(query: &Query) -> Result<WriteOptions, ApiError> {
        let dry_run = match query.get("dryRun") {
            None | Some("") => false,
            Some("All") => true,
            Some(other) => {
                return Err(ApiError::bad_request(&format!(
                    "dryRun: Unsupported value: {other:?}: supported values: \"All\""
                )));
            }
        };
        let field_manager = query
            .get("fieldManager")
            .filter(|m| !m.is_empty())
            .map(str::to_string);
        if let Some(manager) = &field_manager
            && (manager.len() > 128 || manager.chars().any(|c| c.is_control()))
        {
            return Err(ApiError::bad_request(
                "fieldManager: Invalid value: must be at most 128 printable characters",
            ));
        }
        match query.get("fieldValidation") {
            None | Some("" | "Strict" | "Warn" | "Ignore") => {}
            Some(other) => {
                return Err(ApiError::bad_request(&format!(
                    "fieldValidation: Unsupported value: {other:?}: supported values: \"Ignore\", \"Strict\", \"Warn\""
                )));
            }
        }
        Ok(WriteOptions {
            dry_run,
            field_manager,
            force: query.bool("force")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_options() {
        let q = Query::parse(Some(
            "labelSelector=a%3Db&limit=5&resourceVersion=10&resourceVersionMatch=Exact",
        ));
        let o = ListOptions::parse(&q).unwrap();
        assert_eq!(o.limit, 5);
        assert_eq!(o.resource_version.as_deref(), Some("10"));
        assert_eq!(o.resource_version_match, Some(ResourceVersionMatch::Exact));
    }

    #[test]
    fn bad_list_options_are_400() {
        for raw in [
            "limit=x",
            "limit=-1",
            "labelSelector=a%20in%20(",
            "resourceVersionMatch=Exact",
            "resourceVersionMatch=Sometimes&resourceVersion=1",
            "continue=abc&resourceVersion=5",
            "allowWatchBookmarks=maybe",
            "timeoutSeconds=-3",
        ] {
            let err = ListOptions::parse(&Query::parse(Some(raw))).unwrap_err();
            assert_eq!(err.code, 400, "{raw}");
        }
    }

    #[test]
    fn write_options() {
        assert!(
            WriteOptions::parse(&Query::parse(Some("dryRun=All")))
                .unwrap()
                .dry_run
        );
        assert_eq!(
            WriteOptions::parse(&Query::parse(Some("dryRun=Some")))
                .unwrap_err()
                .code,
            400
        );
        assert_eq!(
            WriteOptions::parse(&Query::parse(Some("fieldValidation=Loose")))
                .unwrap_err()
                .code,
            400
        );
    }
}
