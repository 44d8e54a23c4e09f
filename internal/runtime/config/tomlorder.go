package config

import (
	"fmt"
	"slices"

	"github.com/pelletier/go-toml/v2/unstable"
)

// keyOrder returns the names of the keys directly under the table at prefix, in the
// order they first appear in doc, however they are written: `[a."k"]` headers, dotted
// keys (`a."k".x = 1`) or inline tables (`a = { "k" = {...} }`). Mirrors are tried in
// the order they are written, and a decoded Go map forgets it; this recovers it.
func keyOrder(doc []byte, prefix ...string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	note := func(full []string) {
		if len(full) > len(prefix) && slices.Equal(full[:len(prefix)], prefix) && !seen[full[len(prefix)]] {
			seen[full[len(prefix)]] = true
			out = append(out, full[len(prefix)])
		}
	}
	var walk func(base []string, kv *unstable.Node)
	walk = func(base []string, kv *unstable.Node) {
		full := append(slices.Clone(base), keyParts(kv)...)
		note(full)
		if v := kv.Value(); v.Kind == unstable.InlineTable {
			it := v.Children()
			for it.Next() {
				walk(full, it.Node())
			}
		}
	}
	p := unstable.Parser{}
	p.Reset(doc)
	var table []string
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table = keyParts(e)
			note(table)
		case unstable.KeyValue:
			walk(table, e)
		}
	}
	if err := p.Error(); err != nil {
		return nil, fmt.Errorf("parse TOML: %w", err)
	}
	return out, nil
}

// keyParts is the dotted key of a table header or key-value, one string per part.
func keyParts(n *unstable.Node) []string {
	var parts []string
	it := n.Key()
	for it.Next() {
		parts = append(parts, string(it.Node().Data))
	}
	return parts
}
