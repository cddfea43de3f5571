package bench

import (
	"slices"
	"strings"
)

// The reports' markdown tables.

// Header writes a table's header row of heads and its rule: the first
// left columns aligned left (names), the others right (figures).
func Header(b *strings.Builder, heads []string, left int) {
	Row(b, heads...)
	Row(b, append(slices.Repeat([]string{"---"}, left), slices.Repeat([]string{"---:"}, len(heads)-left)...)...)
}

// Row writes one row of a table: "| a | b |" and a newline.
func Row(b *strings.Builder, cells ...string) {
	b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
}
