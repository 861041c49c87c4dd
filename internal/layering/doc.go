// Package layering holds, as a test, the rules about which of
// zonewright's packages may depend on which: the agent on a host holds no
// database credential and so compiles no database code, the workflows do
// no I/O and so compile none either, and the contract packages the sides
// share stay types only.
package layering
