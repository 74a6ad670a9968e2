//! `$lookup` against the examples of its MongoDB page: the equality join (with missing and
//! null local values), an array `localField`, correlated subqueries with `let`, an
//! uncorrelated subquery, the concise form (equality plus pipeline), and nested lookups.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{doc, DateTime, Document};
use shale_doc::aggregate::MemoryCollections;
use shale_doc::{LookupResolver, MongoError, Pipeline};

mod common;
use common::bytes;

fn check(
    resolver: &dyn LookupResolver,
    input: &[Document],
    pipeline: &[Document],
    want: &[Document],
) {
    let parsed = Pipeline::parse(pipeline).unwrap_or_else(|e| panic!("{pipeline:?}: {e}"));
    let got = parsed
        .run_documents(input, resolver)
        .unwrap_or_else(|e| panic!("{pipeline:?}: {e}"));
    let shown: Vec<String> = got.iter().map(Document::to_string).collect();
    assert_eq!(got.len(), want.len(), "{pipeline:?}: got {shown:?}");
    for (g, w) in got.iter().zip(want) {
        assert_eq!(bytes(g), bytes(w), "{pipeline:?}: got {g}, want {w}");
    }
}

fn collections(pairs: &[(&str, Vec<Document>)]) -> MemoryCollections {
    let mut c = MemoryCollections::new();
    for (name, docs) in pairs {
        c.insert(name, docs).expect("encodes");
    }
    c
}

fn date(iso: &str) -> DateTime {
    DateTime::parse_rfc3339_str(iso).expect("valid date")
}

#[test]
fn single_equality_join() {
    let inventory = vec![
        doc! {"_id": 1, "sku": "almonds", "description": "product 1", "instock": 120},
        doc! {"_id": 2, "sku": "bread", "description": "product 2", "instock": 80},
        doc! {"_id": 3, "sku": "cashews", "description": "product 3", "instock": 60},
        doc! {"_id": 4, "sku": "pecans", "description": "product 4", "instock": 70},
        doc! {"_id": 5, "sku": null, "description": "Incomplete"},
        doc! {"_id": 6},
    ];
    let orders = vec![
        doc! {"_id": 1, "item": "almonds", "price": 12, "quantity": 2},
        doc! {"_id": 2, "item": "pecans", "price": 20, "quantity": 1},
        doc! {"_id": 3},
    ];
    check(
        &collections(&[("inventory", inventory.clone())]),
        &orders,
        &[
            doc! {"$lookup": {"from": "inventory", "localField": "item", "foreignField": "sku", "as": "inventory_docs"}},
        ],
        &[
            doc! {"_id": 1, "item": "almonds", "price": 12, "quantity": 2, "inventory_docs": [inventory[0].clone()]},
            doc! {"_id": 2, "item": "pecans", "price": 20, "quantity": 1, "inventory_docs": [inventory[3].clone()]},
            doc! {"_id": 3, "inventory_docs": [inventory[4].clone(), inventory[5].clone()]},
        ],
    );
}

#[test]
fn array_local_field() {
    let members = vec![
        doc! {"_id": 1, "name": "artie", "joined": date("2016-05-01T00:00:00Z"), "status": "A"},
        doc! {"_id": 2, "name": "giraffe", "joined": date("2017-05-01T00:00:00Z"), "status": "D"},
        doc! {"_id": 3, "name": "giraffe1", "joined": date("2017-10-01T00:00:00Z"), "status": "A"},
        doc! {"_id": 4, "name": "panda", "joined": date("2018-10-11T00:00:00Z"), "status": "A"},
        doc! {"_id": 5, "name": "pandabear", "joined": date("2018-12-01T00:00:00Z"), "status": "A"},
        doc! {"_id": 6, "name": "giraffe2", "joined": date("2018-12-01T00:00:00Z"), "status": "D"},
    ];
    let classes = vec![
        doc! {"_id": 1, "title": "Reading is ...", "enrollmentlist": ["giraffe2", "pandabear", "artie"], "days": ["M", "W", "F"]},
        doc! {"_id": 2, "title": "But Writing ...", "enrollmentlist": ["giraffe1", "artie"], "days": ["T", "F"]},
    ];
    let mut want0 = classes[0].clone();
    want0.insert(
        "enrollee_info",
        vec![members[0].clone(), members[4].clone(), members[5].clone()],
    );
    let mut want1 = classes[1].clone();
    want1.insert(
        "enrollee_info",
        vec![members[0].clone(), members[2].clone()],
    );
    check(
        &collections(&[("members", members)]),
        &classes,
        &[
            doc! {"$lookup": {"from": "members", "localField": "enrollmentlist", "foreignField": "name", "as": "enrollee_info"}},
        ],
        &[want0, want1],
    );
}

#[test]
fn correlated_subquery_with_let() {
    let warehouses = vec![
        doc! {"_id": 1, "stock_item": "almonds", "warehouse": "A", "instock": 120},
        doc! {"_id": 2, "stock_item": "pecans", "warehouse": "A", "instock": 80},
        doc! {"_id": 3, "stock_item": "almonds", "warehouse": "B", "instock": 60},
        doc! {"_id": 4, "stock_item": "cookies", "warehouse": "B", "instock": 40},
        doc! {"_id": 5, "stock_item": "cookies", "warehouse": "A", "instock": 80},
    ];
    let orders = vec![
        doc! {"_id": 1, "item": "almonds", "price": 12, "ordered": 2},
        doc! {"_id": 2, "item": "pecans", "price": 20, "ordered": 1},
        doc! {"_id": 3, "item": "cookies", "price": 10, "ordered": 60},
    ];
    let lookup = doc! {"$lookup": {
        "from": "warehouses",
        "let": {"order_item": "$item", "order_qty": "$ordered"},
        "pipeline": [
            {"$match": {"$expr": {"$and": [
                {"$eq": ["$stock_item", "$$order_item"]},
                {"$gte": ["$instock", "$$order_qty"]},
            ]}}},
            {"$project": {"stock_item": 0, "_id": 0}},
        ],
        "as": "stockdata",
    }};
    check(
        &collections(&[("warehouses", warehouses)]),
        &orders,
        &[lookup],
        &[
            doc! {"_id": 1, "item": "almonds", "price": 12, "ordered": 2, "stockdata": [{"warehouse": "A", "instock": 120}, {"warehouse": "B", "instock": 60}]},
            doc! {"_id": 2, "item": "pecans", "price": 20, "ordered": 1, "stockdata": [{"warehouse": "A", "instock": 80}]},
            doc! {"_id": 3, "item": "cookies", "price": 10, "ordered": 60, "stockdata": [{"warehouse": "A", "instock": 80}]},
        ],
    );
}

#[test]
fn uncorrelated_subquery() {
    let holidays = vec![
        doc! {"_id": 1, "year": 2018, "name": "New Years", "date": date("2018-01-01T00:00:00Z")},
        doc! {"_id": 2, "year": 2018, "name": "Pi Day", "date": date("2018-03-14T00:00:00Z")},
        doc! {"_id": 3, "year": 2018, "name": "Ice Cream Day", "date": date("2018-07-15T00:00:00Z")},
        doc! {"_id": 4, "year": 2017, "name": "New Years", "date": date("2017-01-01T00:00:00Z")},
        doc! {"_id": 5, "year": 2017, "name": "Ice Cream Day", "date": date("2017-07-16T00:00:00Z")},
    ];
    let absences = vec![
        doc! {"_id": 1, "student": "Ann Aardvark", "sickdays": [date("2018-05-01T00:00:00Z"), date("2018-08-23T00:00:00Z")]},
        doc! {"_id": 2, "student": "Zoe Zebra", "sickdays": [date("2018-02-01T00:00:00Z"), date("2018-05-23T00:00:00Z")]},
    ];
    let found = vec![
        doc! {"name": "New Years", "date": date("2018-01-01T00:00:00Z")},
        doc! {"name": "Pi Day", "date": date("2018-03-14T00:00:00Z")},
        doc! {"name": "Ice Cream Day", "date": date("2018-07-15T00:00:00Z")},
    ];
    let want: Vec<Document> = absences
        .iter()
        .map(|a| {
            let mut a = a.clone();
            a.insert("holidays", found.clone());
            a
        })
        .collect();
    check(
        &collections(&[("holidays", holidays)]),
        &absences,
        &[doc! {"$lookup": {
            "from": "holidays",
            "pipeline": [
                {"$match": {"year": 2018}},
                {"$project": {"_id": 0, "date": {"name": "$name", "date": "$date"}}},
                {"$replaceRoot": {"newRoot": "$date"}},
            ],
            "as": "holidays",
        }}],
        &want,
    );
}

#[test]
fn concise_form_and_nested_lookups() {
    let restaurants = vec![
        doc! {"_id": 1, "name": "American Steak House", "food": ["filet", "sirloin"], "beverages": ["beer", "wine"]},
        doc! {"_id": 2, "name": "Honest John Pizza", "food": ["cheese pizza", "pepperoni pizza"], "beverages": ["soda"]},
    ];
    let orders = vec![
        doc! {"_id": 1, "item": "filet", "restaurant_name": "American Steak House"},
        doc! {"_id": 2, "item": "cheese pizza", "restaurant_name": "Honest John Pizza", "drink": "lemonade"},
        doc! {"_id": 3, "item": "cheese pizza", "restaurant_name": "Honest John Pizza", "drink": "soda"},
    ];
    let resolver = collections(&[
        ("restaurants", restaurants.clone()),
        ("orders", orders.clone()),
    ]);
    let concise = doc! {"$lookup": {
        "from": "restaurants",
        "localField": "restaurant_name",
        "foreignField": "name",
        "let": {"orders_drink": "$drink"},
        "pipeline": [{"$match": {"$expr": {"$in": ["$$orders_drink", "$beverages"]}}}],
        "as": "matches",
    }};
    let mut want: Vec<Document> = orders.clone();
    want[0].insert("matches", Vec::<Document>::new());
    want[1].insert("matches", Vec::<Document>::new());
    want[2].insert("matches", vec![restaurants[1].clone()]);
    check(&resolver, &orders, &[concise], &want);

    // A nested lookup sees the outer variable; its own `let` rebinds a name.
    let nested = doc! {"$lookup": {
        "from": "restaurants",
        "let": {"r": "$name", "d": "$beverages"},
        "pipeline": [
            {"$lookup": {
                "from": "orders",
                "let": {"d": "$name"},
                "pipeline": [
                    {"$match": {"$expr": {"$and": [{"$eq": ["$restaurant_name", "$$r"]}, {"$eq": ["$$d", "$$r"]}]}}},
                    {"$project": {"_id": 1}},
                ],
                "as": "orders",
            }},
            {"$match": {"$expr": {"$eq": ["$name", "$$r"]}}},
            {"$project": {"orders": 1, "_id": 0}},
        ],
        "as": "found",
    }};
    check(
        &resolver,
        &restaurants[1..],
        &[nested, doc! {"$project": {"found": 1}}],
        &[doc! {"_id": 2, "found": [{"orders": [{"_id": 2}, {"_id": 3}]}]}],
    );
}

#[test]
fn resolver_errors_and_missing_collections_pass_through() {
    struct Failing;
    impl LookupResolver for Failing {
        fn scan(&self, _: &str) -> Result<Vec<bson::RawDocumentBuf>, MongoError> {
            Err(MongoError::new(
                shale_doc::ErrorCode::InternalError,
                "disk on fire",
            ))
        }
    }
    let lookup = doc! {"$lookup": {"from": "x", "localField": "a", "foreignField": "b", "as": "j"}};
    let pipeline = Pipeline::parse(std::slice::from_ref(&lookup)).expect("parses");
    let e = pipeline
        .run_documents(&[doc! {"a": 1}], &Failing)
        .unwrap_err();
    assert_eq!(e.message, "disk on fire");
    check(
        &MemoryCollections::new(),
        &[doc! {"a": 1}],
        &[lookup],
        &[doc! {"a": 1, "j": []}],
    );
}
