// Package migrations holds zonewright's schema as goose SQL migrations,
// embedded so every binary can migrate its own database.
package migrations

import "embed"

// FS holds the migration files.
//
//go:embed *.sql
var FS embed.FS
