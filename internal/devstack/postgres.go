package devstack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
	postgresplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql"
	"go.temporal.io/server/tools/common/schema"
	sqltool "go.temporal.io/server/tools/sql"
)

// The schemas of this server version, embedded in the server module.
const (
	mainSchema       = "postgresql/v12/temporal"
	visibilitySchema = "postgresql/v12/visibility"
	// VisibilitySuffix names the visibility database beside the main one.
	VisibilitySuffix = "_visibility"
	// schemaLock is the advisory lock servers starting together take
	// while they create and migrate the databases.
	schemaLock = 7233_0001
)

// postgresStores returns the server's main and visibility stores on the
// PostgreSQL of databaseURL: its database and <database>_visibility, each
// created when missing and migrated to this server version's schema, as
// temporal-sql-tool's create-database, setup-schema -v 0.0 and
// update-schema do. Servers starting at once migrate one at a time.
func postgresStores(ctx context.Context, databaseURL string, logger log.Logger) (main, visibility *config.SQL, release func(), err error) {
	main, err = postgresConfig(databaseURL)
	if err != nil {
		return nil, nil, nil, err
	}
	visibility = new(config.SQL)
	*visibility = *main
	visibility.DatabaseName = main.DatabaseName + VisibilitySuffix

	admin, err := pgx.Connect(ctx, adminURL(databaseURL))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	// The lock is held until the caller has built its server: building
	// one saves the cluster's metadata, and two processes saving it at
	// once into a new database fail one of them with a duplicate key.
	release = sync.OnceFunc(func() { _ = admin.Close(context.Background()) }) // the session's end unlocks
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock($1)", schemaLock); err != nil {
		release()
		return nil, nil, nil, fmt.Errorf("lock the schema: %w", err)
	}
	for _, s := range []struct {
		conf   *config.SQL
		schema string
	}{{main, mainSchema}, {visibility, visibilitySchema}} {
		if err := ensureDatabase(ctx, admin, s.conf.DatabaseName); err != nil {
			release()
			return nil, nil, nil, err
		}
		if err := migrate(s.conf, s.schema, logger); err != nil {
			release()
			return nil, nil, nil, fmt.Errorf("database %s: %w", s.conf.DatabaseName, err)
		}
	}
	return main, visibility, release, nil
}

// postgresConfig is the server's SQL configuration for a postgres:// URL;
// its query parameters (sslmode, sslrootcert, ...) are passed on.
func postgresConfig(databaseURL string) (*config.SQL, error) {
	u, err := url.Parse(databaseURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
		return nil, fmt.Errorf("database URL: want postgres://user:password@host:port/database")
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" || strings.Contains(db, "/") {
		return nil, errors.New("database URL: no database name")
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "5432"
	}
	password, _ := u.User.Password()
	attrs := map[string]string{}
	for k, v := range u.Query() {
		attrs[k] = v[len(v)-1]
	}
	return &config.SQL{
		PluginName:        postgresplugin.PluginNamePGX,
		DatabaseName:      db,
		ConnectAddr:       net.JoinHostPort(host, port),
		ConnectProtocol:   "tcp",
		User:              u.User.Username(),
		Password:          password,
		ConnectAttributes: attrs,
		// Each service keeps its own pool: 4 services of up to 20 each
		// stay inside PostgreSQL's default 100 connections with room
		// for zonewright's own.
		MaxConns:        20,
		MaxIdleConns:    20,
		MaxConnLifetime: time.Hour,
	}, nil
}

// adminURL is databaseURL with the maintenance database "postgres", where
// databases are created.
func adminURL(databaseURL string) string {
	u, _ := url.Parse(databaseURL)
	u.Path = "/postgres"
	return u.String()
}

func ensureDatabase(ctx context.Context, admin *pgx.Conn, name string) error {
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("look up database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// migrate brings the database to the newest version of schemaName:
// version tables first (a no-op once there), then every versioned step
// after the database's version.
func migrate(conf *config.SQL, schemaName string, logger log.Logger) error {
	conn, err := sqltool.NewConnection(conf, logger)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close()
	if err := schema.NewSetupSchemaTask(conn, &schema.SetupConfig{InitialVersion: "0.0"}, logger).Run(); err != nil {
		return fmt.Errorf("set up schema versioning: %w", err)
	}
	if err := schema.NewUpdateSchemaTask(conn, &schema.UpdateConfig{DBName: conf.DatabaseName, SchemaName: schemaName}, logger).Run(); err != nil {
		return fmt.Errorf("migrate schema %s: %w", schemaName, err)
	}
	return nil
}
