// Package problem is how relect's components report what is wrong with
// the options the root package hands them: a field's name, and a problem
// written as a format and its args, where an arg of type Ref names another
// field. The root package turns each report into a relect.FieldError,
// whose Problem renders the Refs (relect.FieldError.Related); a component
// never builds an error of its own for bad options. NilInside is a check
// they share.
package problem

import "reflect"

// Ref is an arg of a Report that names a field, unqualified
// ("LeaseDuration", "Shards.Names"): the root package qualifies it with
// the struct's name and lists it in FieldError.Related.
type Ref string

// Report reports field (unqualified, as a Ref) invalid: format and args
// say why, and the args of type Ref name the other fields involved.
type Report func(field, format string, args ...any)

// NilInside reports whether v is an interface holding a nil pointer (or
// other nil reference): set, yet unusable. A nil v is not set: false.
func NilInside(v any) bool {
	if v == nil {
		return false
	}
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return r.IsNil()
	}
	return false
}
