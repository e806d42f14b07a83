//! Query parameters of list, watch, write and delete requests, parsed and checked once.
//!
//! Bad parameters are the client's fault and must come back as the Status kube-apiserver would give,
//! never as a default silently applied: `400 BadRequest` for a value that does not parse, and for
//! list and watch options the `422 Invalid` `ListOptions.meta.k8s.io` of k8s.io/apimachinery's
//! `ValidateListOptions` (list) and `validateWatchOptions` (watch), after
//! `SetListOptionsDefaults` (a watch from `""` or `"0"` that names neither `sendInitialEvents` nor
//! `resourceVersionMatch` is a WatchList: `sendInitialEvents=true`, `NotOlderThan`), as
//! kube-apiserver does with the WatchList feature on.

use std::collections::HashMap;

use kcp_apimachinery::fields::FieldSelector;
use kcp_apimachinery::labels::LabelSelector;
use kcp_apimachinery::{ApiError, FieldError};

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
    /// After kube's defaulting: `Some(true)` for a WatchList (initial state, then changes).
    pub send_initial_events: Option<bool>,
}

impl ListOptions {
    /// The options of a list (or deletecollection): `ValidateListOptions` with `Watch` false.
    pub fn parse(query: &Query) -> Result<ListOptions, ApiError> {
        Self::parse_as(query, false)
    }

    /// Whether a label or field selector narrows what is listed or watched.
    pub fn selects(&self) -> bool {
        self.label_selector != LabelSelector::everything() || !self.field_selector.is_empty()
    }

    /// The options of a watch: `SetListOptionsDefaults`, then `validateWatchOptions`.
    pub fn parse_watch(query: &Query) -> Result<ListOptions, ApiError> {
        Self::parse_as(query, true)
    }

    fn parse_as(query: &Query, watch: bool) -> Result<ListOptions, ApiError> {
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
        let continue_token = query
            .get("continue")
            .filter(|v| !v.is_empty())
            .map(str::to_string);
        let allow_watch_bookmarks = query.bool("allowWatchBookmarks")?;
        let mut send_initial_events = match query.get("sendInitialEvents") {
            None | Some("") => None,
            Some(_) => Some(query.bool("sendInitialEvents")?),
        };
        let mut match_raw = query
            .get("resourceVersionMatch")
            .filter(|v| !v.is_empty())
            .map(str::to_string);
        if watch
            && send_initial_events.is_none()
            && match_raw.is_none()
            && matches!(resource_version.as_deref(), None | Some("0"))
        {
            send_initial_events = Some(true);
            match_raw = Some(NOT_OLDER_THAN.to_string());
        }
        let errors = if watch {
            validate_watch_options(
                match_raw.as_deref(),
                send_initial_events,
                continue_token.is_some(),
            )
        } else {
            validate_list_options(
                match_raw.as_deref(),
                resource_version.as_deref(),
                send_initial_events,
                continue_token.is_some(),
            )
        };
        if !errors.is_empty() {
            return Err(ApiError::invalid("meta.k8s.io", "ListOptions", "", errors));
        }
        let resource_version_match = match match_raw.as_deref() {
            Some(EXACT) => Some(ResourceVersionMatch::Exact),
            Some(NOT_OLDER_THAN) => Some(ResourceVersionMatch::NotOlderThan),
            _ => None,
        };
        // Checked by the storage in kube (after validation), hence a plain 400.
        if !watch
            && continue_token.is_some()
            && resource_version.as_deref().is_some_and(|rv| rv != "0")
        {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        let timeout_seconds = match query.int("timeoutSeconds")? {
            Some(n) if n < 0 => {
                return Err(ApiError::bad_request("timeoutSeconds must be non-negative"));
            }
            other => other.map(|n| n as u64),
        };
        Ok(ListOptions {
            label_selector,
            field_selector,
            limit,
            continue_token,
            resource_version,
            resource_version_match,
            allow_watch_bookmarks,
            timeout_seconds,
            send_initial_events,
        })
    }
}

const EXACT: &str = "Exact";
const NOT_OLDER_THAN: &str = "NotOlderThan";

/// k8s.io/apimachinery's `ValidateListOptions` for a list.
fn validate_list_options(
    match_raw: Option<&str>,
    resource_version: Option<&str>,
    send_initial_events: Option<bool>,
    has_continue: bool,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(matched) = match_raw {
        if resource_version.is_none() {
            errors.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if has_continue {
            errors.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        if matched != EXACT && matched != NOT_OLDER_THAN {
            errors.push(FieldError::not_supported(
                "resourceVersionMatch",
                matched.into(),
                &[EXACT, NOT_OLDER_THAN, ""],
            ));
        }
        if matched == EXACT && resource_version == Some("0") {
            errors.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
    }
    if send_initial_events.is_some() {
        errors.push(FieldError::forbidden(
            "sendInitialEvents",
            "sendInitialEvents is forbidden for list",
        ));
    }
    errors
}

/// k8s.io/apimachinery's `validateWatchOptions` (the WatchList feature on).
fn validate_watch_options(
    match_raw: Option<&str>,
    send_initial_events: Option<bool>,
    has_continue: bool,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if send_initial_events.is_some() && match_raw != Some(NOT_OLDER_THAN) {
        errors.push(FieldError::forbidden(
            "resourceVersionMatch",
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    if let Some(matched) = match_raw {
        if send_initial_events.is_none() {
            errors.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ));
        }
        if matched != NOT_OLDER_THAN {
            errors.push(FieldError::not_supported(
                "resourceVersionMatch",
                matched.into(),
                &[NOT_OLDER_THAN],
            ));
        }
        if has_continue {
            errors.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
    }
    errors
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
            "continue=abc&resourceVersion=5",
            "allowWatchBookmarks=maybe",
            "timeoutSeconds=-3",
        ] {
            let err = ListOptions::parse(&Query::parse(Some(raw))).unwrap_err();
            assert_eq!(err.code, 400, "{raw}");
        }
    }

    fn invalid(raw: &str, watch: bool) -> String {
        let query = Query::parse(Some(raw));
        let err = if watch {
            ListOptions::parse_watch(&query)
        } else {
            ListOptions::parse(&query)
        }
        .unwrap_err();
        assert_eq!(err.code, 422, "{raw}: {}", err.message);
        err.message
    }

    #[test]
    fn list_validation_is_kubes() {
        assert_eq!(
            invalid("resourceVersionMatch=Exact", false),
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
        );
        assert_eq!(
            invalid("resourceVersionMatch=Sometimes&resourceVersion=1", false),
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Unsupported value: \"Sometimes\": supported values: \"Exact\", \"NotOlderThan\", \"\""
        );
        assert_eq!(
            invalid("resourceVersionMatch=Exact&resourceVersion=0", false),
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""
        );
        assert_eq!(
            invalid("sendInitialEvents=true", false),
            "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"
        );
    }

    #[test]
    fn watch_list_is_accepted_and_defaulted() {
        let informer = Query::parse(Some(
            "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
        ));
        let o = ListOptions::parse_watch(&informer).unwrap();
        assert_eq!(o.send_initial_events, Some(true));
        assert!(o.allow_watch_bookmarks);
        assert_eq!(o.resource_version, None);
        // A legacy watch from "" or "0" is defaulted to a WatchList; from N it stays a watch.
        for raw in ["watch=1", "watch=1&resourceVersion=0"] {
            let o = ListOptions::parse_watch(&Query::parse(Some(raw))).unwrap();
            assert_eq!(o.send_initial_events, Some(true), "{raw}");
        }
        let o = ListOptions::parse_watch(&Query::parse(Some("watch=1&resourceVersion=7"))).unwrap();
        assert_eq!(o.send_initial_events, None);
        let o = ListOptions::parse_watch(&Query::parse(Some(
            "watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan&resourceVersion=7",
        )))
        .unwrap();
        assert_eq!(o.send_initial_events, Some(false));
    }

    #[test]
    fn watch_validation_is_kubes() {
        assert_eq!(
            invalid("watch=1&sendInitialEvents=true", true),
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
        );
        assert_eq!(
            invalid(
                "watch=1&resourceVersionMatch=NotOlderThan&resourceVersion=5",
                true
            ),
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"
        );
        let both = invalid(
            "watch=1&sendInitialEvents=true&resourceVersionMatch=Exact",
            true,
        );
        assert!(
            both.contains("sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")
                && both.contains("resourceVersionMatch: Unsupported value: \"Exact\": supported values: \"NotOlderThan\""),
            "{both}"
        );
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
