package dev.regraph.neo4j;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

import inet.ipaddr.IPAddressString;
import org.neo4j.configuration.GraphDatabaseInternalSettings;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.graphdb.GraphDatabaseService;
import org.neo4j.io.ByteUnit;

/**
 * Starts a Neo4j Community DBMS in this JVM with only the Bolt connector, on a loopback address.
 *
 * <p>ReGraph's Python side owns the lifecycle: it generates the password, starts this process,
 * waits until Bolt answers and stops it with SIGTERM (or by closing our stdin). The password is
 * read from a file so that it never appears on a command line.
 *
 * <p>Arguments: {@code --home DIR --port N --password-file FILE [--host H] [--pagecache SIZE_MB]
 * [--heap-tx-max SIZE_MB] [--exit-on-stdin-eof]}.
 */
public final class EmbeddedNeo4j {
    private static final String READY_LINE = "REGRAPH_NEO4J_READY";
    private static final String PASSWORD_MARKER = "regraph-password.sha256";

    /** Procedures that may be loaded: the built-in ones ReGraph and its readers call. */
    private static final String[] ALLOWED_PROCEDURES = {
        "db.labels", "db.relationshipTypes", "db.propertyKeys", "db.schema.*", "db.index.vector.queryNodes",
        "db.index.fulltext.queryNodes", "db.index.fulltext.queryRelationships", "db.awaitIndexes",
        "dbms.components",
    };

    private EmbeddedNeo4j() {}

    private static Path emptyDir(Path dir) throws IOException {
        Files.createDirectories(dir);
        return dir;
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> options = parse(args);
        Path home = Path.of(require(options, "home")).toAbsolutePath();
        String host = options.getOrDefault("host", "127.0.0.1");
        int port = Integer.parseInt(require(options, "port"));
        Path passwordFile = Path.of(require(options, "password-file"));
        long pagecacheMb = Long.parseLong(options.getOrDefault("pagecache", "256"));
        long txMaxMb = Long.parseLong(options.getOrDefault("heap-tx-max", "512"));
        String password = Files.readString(passwordFile, StandardCharsets.UTF_8).strip();
        if (password.length() < 8) {
            throw new IllegalArgumentException("the password in " + passwordFile + " is shorter than 8 characters");
        }
        Files.createDirectories(home);

        DatabaseManagementService dbms = new DatabaseManagementServiceBuilder(home)
                .setConfig(BoltConnector.enabled, true)
                .setConfig(BoltConnector.listen_address, new SocketAddress(host, port))
                .setConfig(BoltConnector.advertised_address, new SocketAddress(host, port))
                .setConfig(GraphDatabaseSettings.auth_enabled, true)
                .setConfig(GraphDatabaseSettings.pagecache_memory, ByteUnit.mebiBytes(pagecacheMb))
                .setConfig(GraphDatabaseSettings.memory_transaction_global_max_size, ByteUnit.mebiBytes(txMaxMb))
                // Even a query that got past the API's checks reads no file and fetches no URL:
                // LOAD CSV file:// URLs are off (and rooted in an empty directory), every address is
                // blocked for http(s)/ftp URLs, and no plugin procedures are loaded.
                .setConfig(GraphDatabaseSettings.allow_file_urls, false)
                .setConfig(GraphDatabaseSettings.load_csv_file_url_root, emptyDir(home.resolve("no-import")))
                .setConfig(GraphDatabaseInternalSettings.cypher_ip_blocklist,
                        List.of(new IPAddressString("0.0.0.0/0"), new IPAddressString("::/0")))
                .setConfig(GraphDatabaseSettings.plugin_dir, emptyDir(home.resolve("no-plugins")))
                .setConfig(GraphDatabaseSettings.procedure_allowlist, List.of(ALLOWED_PROCEDURES))
                // Stopping waited ~10 s in Bolt's network threads for new work that never comes (netty's
                // quiet period); our clients have closed their connections by then (issue 31).
                .setConfig(GraphDatabaseInternalSettings.netty_server_shutdown_quiet_period, 0)
                .build();

        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            System.out.println("REGRAPH_NEO4J_STOPPING");
            System.out.flush();
            dbms.shutdown();
            stopped.countDown();
        }, "regraph-neo4j-shutdown"));

        setPassword(dbms, home, password);
        System.out.println(READY_LINE + " bolt://" + host + ":" + port);
        System.out.flush();

        if (options.containsKey("exit-on-stdin-eof")) {
            // The parent holds our stdin open; when it dies, EOF arrives and we shut down
            // instead of leaving an orphaned server holding the data directory lock.
            InputStream in = System.in;
            byte[] buffer = new byte[256];
            while (in.read(buffer) >= 0) {
                // ignore anything written; only EOF matters
            }
            System.exit(0);
        }
        stopped.await();
    }

    /** Sets the neo4j user's password when it differs from the one last set (Neo4j refuses an unchanged one). */
    private static void setPassword(DatabaseManagementService dbms, Path home, String password)
            throws IOException, NoSuchAlgorithmException {
        Path marker = home.resolve(PASSWORD_MARKER);
        String digest = HexFormat.of().formatHex(
                MessageDigest.getInstance("SHA-256").digest(password.getBytes(StandardCharsets.UTF_8)));
        if (Files.exists(marker) && Files.readString(marker, StandardCharsets.UTF_8).strip().equals(digest)) {
            return;
        }
        GraphDatabaseService system = dbms.database(GraphDatabaseSettings.SYSTEM_DATABASE_NAME);
        system.executeTransactionally(
                "ALTER USER neo4j SET PASSWORD $password CHANGE NOT REQUIRED", Map.of("password", password));
        Files.writeString(marker, digest + "\n", StandardCharsets.UTF_8);
    }

    private static Map<String, String> parse(String[] args) {
        Map<String, String> options = new java.util.HashMap<>();
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            if (!arg.startsWith("--")) {
                throw new IllegalArgumentException("unexpected argument: " + arg);
            }
            String key = arg.substring(2);
            if (key.equals("exit-on-stdin-eof")) {
                options.put(key, "true");
            } else if (i + 1 < args.length) {
                options.put(key, args[++i]);
            } else {
                throw new IllegalArgumentException("missing value for " + arg);
            }
        }
        return options;
    }

    private static String require(Map<String, String> options, String key) {
        String value = options.get(key);
        if (value == null) {
            throw new IllegalArgumentException("missing --" + key);
        }
        return value;
    }
}
