"""The markdown contract kind: headings, sections, references and coverage checks."""
