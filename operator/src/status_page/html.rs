//! The page as HTML: an askama template (`templates/status.html`, escaped HTML, compiled into
//! the binary) over [`Page`]. It reloads itself with `<meta http-equiv="refresh">`; no script.

use askama::Template;

use super::view::Page;

#[derive(Template)]
#[template(path = "status.html")]
struct StatusHtml<'a> {
    page: &'a Page,
}

/// The page could not be rendered (a template error; the template is checked at build time).
#[derive(Debug, thiserror::Error)]
#[error("failed to render the status page")]
pub struct RenderError(#[from] askama::Error);

/// `page` as an HTML document.
pub fn render(page: &Page) -> Result<String, RenderError> {
    Ok(StatusHtml { page }.render()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status_page::fixtures::{now, snapshot};
    use crate::status_page::view::{Snapshot, page};

    fn html(snapshot: &Snapshot) -> String {
        render(&page(snapshot, now())).expect("renders")
    }

    #[test]
    fn names_every_object_with_its_phase() {
        let html = html(&snapshot());
        for row in [
            r##"<td>CacheServer</td><td>kcp</td><td><a href="#CacheServer-kcp-cache">cache</a></td><td class="ok">Running</td>"##,
            r##"<td>RootShard</td><td>kcp</td><td><a href="#RootShard-kcp-root">root</a></td><td class="ok">Running</td>"##,
            r##"<td>Shard</td><td>kcp</td><td><a href="#Shard-kcp-shard-1">shard-1</a></td><td class="progress">Provisioning</td>"##,
            r##"<td>FrontProxy</td><td>kcp</td><td><a href="#FrontProxy-kcp-public">public</a></td><td class="bad">Degraded</td>"##,
        ] {
            assert!(html.contains(row), "{row} missing in\n{html}");
        }
        assert!(html.contains("upgrading to v2"), "{html}");
        assert!(html.contains("<code>external https://kcp.example.com:6443</code>"));
    }

    #[test]
    fn refreshes_itself_without_script() {
        let html = html(&snapshot());
        assert!(
            html.contains(r#"<meta http-equiv="refresh" content="10">"#),
            "{html}"
        );
        assert!(!html.contains("<script"), "no JavaScript");
    }

    #[test]
    fn escapes_what_users_wrote() {
        let html = html(&snapshot());
        assert!(
            html.contains("RootShard &#34;gone&#34; &#60;missing&#62;")
                || html.contains("RootShard &quot;gone&quot; &lt;missing&gt;"),
            "{html}"
        );
        assert!(!html.contains("<missing>"));
    }

    #[test]
    fn certificates_show_dates_and_a_renewal_warning_never_content() {
        let html = html(&snapshot());
        assert!(html.contains(
            r#"<tr><td>root-rootshard-client</td><td>2027-01-15 08:08:20 UTC</td><td>2027-01-15 07:51:40 UTC</td><td class="warn">renewal due</td></tr>"#
        ), "{html}");
        assert!(html.contains(r#"<td class="bad">expired</td>"#));
        assert!(!html.contains("BEGIN"), "no PEM on the page");
    }

    #[test]
    fn events_are_listed() {
        let html = html(&snapshot());
        assert!(html.contains(
            r#"<td class="warn">Warning</td><td>FrontProxy kcp/public</td><td>ReferenceNotFound</td>"#
        ), "{html}");
    }

    #[test]
    fn standby_unsynced_and_empty_pages_say_so() {
        let mut standby = snapshot();
        standby.replica = crate::manager::health::Phase::Standby;
        standby.synced = false;
        let page = html(&standby);
        assert!(page.contains(r#"id="standby""#), "{page}");
        assert!(page.contains(r#"id="not-synced""#));
        let empty = html(&Snapshot::default());
        assert!(empty.contains(r#"id="no-components""#), "{empty}");
        assert!(empty.contains(r#"id="no-events""#));
        assert!(!html(&snapshot()).contains(r#"id="standby""#));
    }
}
