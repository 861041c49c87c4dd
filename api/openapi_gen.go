//go:build ignore

// openapi_gen writes openapi.json, the API's OpenAPI document: go generate ./api/
package main

import (
	"fmt"
	"os"

	"github.com/zonewright/zonewright/api"
)

func main() {
	b, err := api.BuildOpenAPI()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile("openapi.json", b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
