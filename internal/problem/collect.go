package problem

import "fmt"

// Reports collects what a Report is told, each as "field: problem" with
// the Refs in brackets: a component's tests read what its checks said.
// Its zero value is empty; it is not safe for concurrent use.
type Reports []string

// Bad is a Report that appends to r.
func (r *Reports) Bad(field, format string, args ...any) {
	shown := make([]any, len(args))
	for i, a := range args {
		if ref, ok := a.(Ref); ok {
			a = "[" + string(ref) + "]"
		}
		shown[i] = a
	}
	*r = append(*r, field+": "+fmt.Sprintf(format, shown...))
}
