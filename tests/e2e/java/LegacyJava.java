// The MongoDB Java driver 2.13 against ShaleDB (issue 26): it queries with OP_QUERY on the
// collection, pages with OP_GET_MORE, closes with OP_KILL_CURSORS and writes unacknowledged
// with OP_INSERT/OP_UPDATE/OP_DELETE. Exits non-zero with a message on the first mismatch.
import com.mongodb.*;
import java.util.*;

public class LegacyJava {
    static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        MongoClient client = new MongoClient(new ServerAddress("127.0.0.1", port),
                MongoClientOptions.builder().connectTimeout(5000).build());
        try {
            run(client.getDB("javalegacy"));
        } finally {
            client.close();
        }
        System.out.println("OK");
    }

    static void run(DB db) {
        DBCollection c = db.getCollection("docs");
        c.drop();
        List<DBObject> batch = new ArrayList<DBObject>();
        for (int i = 0; i < 2500; i++) {
            batch.add(new BasicDBObject("_id", i).append("v", i % 7));
        }
        c.insert(batch);
        check(c.count() == 2500, "count after insert");

        Set<Integer> seen = new HashSet<Integer>();
        int n = 0;
        DBCursor all = c.find();
        while (all.hasNext()) {
            seen.add((Integer) all.next().get("_id"));
            n++;
        }
        check(n == 2500 && seen.size() == 2500, "2,500-document cursor: " + n + " / " + seen.size());

        DBObject one = c.findOne(new BasicDBObject("_id", 42));
        check(one != null && ((Integer) one.get("v")) == 0, "findOne");

        DBCursor sorted = c.find(new BasicDBObject("v", 1), new BasicDBObject("_id", 1))
                .sort(new BasicDBObject("_id", -1)).skip(1).limit(3);
        List<Object> ids = new ArrayList<Object>();
        for (DBObject d : sorted) {
            check(d.keySet().equals(Collections.singleton("_id")), "projection: " + d);
            ids.add(d.get("_id"));
        }
        check(ids.equals(Arrays.asList(2486, 2479, 2472)), "sort/skip/limit: " + ids);

        WriteResult up = c.update(new BasicDBObject("v", 2),
                new BasicDBObject("$set", new BasicDBObject("x", 1)), false, true);
        check(up.getN() == 357 && up.isUpdateOfExisting(), "update: " + up);
        WriteResult rm = c.remove(new BasicDBObject("v", 3));
        check(rm.getN() == 357, "remove: " + rm);

        // Unacknowledged writes go as OP_INSERT/OP_UPDATE/OP_DELETE.
        c.insert(new BasicDBObject("_id", 5000), WriteConcern.UNACKNOWLEDGED);
        c.update(new BasicDBObject("_id", 5000), new BasicDBObject("$set", new BasicDBObject("y", 2)),
                false, false, WriteConcern.UNACKNOWLEDGED);
        CommandResult gle = db.getLastError();
        check(gle.ok() && gle.getInt("n") == 1, "getLastError after OP_UPDATE: " + gle);
        c.remove(new BasicDBObject("_id", 5000), WriteConcern.UNACKNOWLEDGED);
        gle = db.getLastError();
        check(gle.ok() && gle.getInt("n") == 1, "getLastError after OP_DELETE: " + gle);
        check(c.count() == 2500 - 357, "count after writes");

        try {
            c.findOne(new BasicDBObject("a", new BasicDBObject("$bogus", 1)));
            check(false, "a bad operator must fail, not return a document");
        } catch (MongoException e) {
            check(e.getCode() > 0, "error code: " + e);
        }
    }
}
