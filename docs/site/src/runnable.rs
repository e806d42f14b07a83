//! The fenced code blocks of a Markdown page, for tests that run what a page tells readers to
//! run: a block whose info string is `sh` followed by the word `run` (```` ```sh run ````) is
//! runnable; GitHub and mdBook highlight it as shell like any other `sh` block.

/// One fenced code block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// 1-based line of the opening fence.
    pub line: usize,
    /// The info string after the fence (`sh run`).
    pub info: String,
    pub text: String,
}

impl Block {
    /// Whether the block is marked runnable (`sh run`).
    pub fn is_runnable(&self) -> bool {
        let mut words = self.info.split_whitespace();
        words.next() == Some("sh") && words.any(|word| word == "run")
    }

    /// The commands of the block: lines that are not comments, with `\` continuations joined.
    pub fn commands(&self) -> Vec<String> {
        let mut commands = Vec::new();
        let mut current = String::new();
        for line in self.text.lines() {
            let line = line.trim();
            if current.is_empty() && (line.is_empty() || line.starts_with('#')) {
                continue;
            }
            match line.strip_suffix('\\') {
                Some(start) => {
                    current.push_str(start.trim_end());
                    current.push(' ');
                }
                None => {
                    current.push_str(line);
                    commands.push(std::mem::take(&mut current));
                }
            }
        }
        if !current.is_empty() {
            commands.push(current);
        }
        commands
    }
}

/// Every fenced (```` ``` ```` or `~~~`) code block of `markdown`, in order.
pub fn blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<(String, Block)> = None;
    for (index, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        match open.take() {
            None => {
                let fence: String = trimmed
                    .chars()
                    .take_while(|c| *c == '`' || *c == '~')
                    .collect();
                if fence.len() >= 3
                    && fence
                        .chars()
                        .all(|c| c == fence.chars().next().unwrap_or('`'))
                {
                    open = Some((
                        fence.clone(),
                        Block {
                            line: index + 1,
                            info: trimmed[fence.len()..].trim().to_owned(),
                            text: String::new(),
                        },
                    ));
                }
            }
            Some((fence, mut block)) => {
                if trimmed.starts_with(&fence) && trimmed[fence.len()..].trim().is_empty() {
                    blocks.push(block);
                } else {
                    block.text.push_str(line);
                    block.text.push('\n');
                    open = Some((fence, block));
                }
            }
        }
    }
    blocks
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn runnable_blocks_and_their_commands() {
        let page = "# T\n\n```sh run\n# comment\nkubectl get ns\nkubectl create \\\n  ns x\n```\n\n~~~sh\nkcp start\n~~~\n\n````yaml\n```\n````\n";
        let blocks = blocks(page);
        assert_eq!(blocks.len(), 3);
        assert!(blocks[0].is_runnable());
        assert_eq!(blocks[0].line, 3);
        assert_eq!(
            blocks[0].commands(),
            vec!["kubectl get ns", "kubectl create ns x"]
        );
        assert!(!blocks[1].is_runnable());
        assert_eq!(blocks[1].commands(), vec!["kcp start"]);
        assert_eq!(blocks[2].info, "yaml");
        assert_eq!(blocks[2].text, "```\n");
    }
}
