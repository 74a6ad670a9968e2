//! Variables in expressions, resolved while parsing as mongod's `VariablesParseState` does:
//! `"$$name"` or `"$$name.a.b"` names, innermost first, a `$let` variable (evaluated per
//! document from the evaluation stack), a user variable of the command (`Variables`: its
//! value becomes a constant), or a system variable: `ROOT`, `CURRENT` (the document unless a
//! `$let` or `let` rebinds it, which field paths then follow), `REMOVE`, `NOW`,
//! `CLUSTER_TIME`, `SEARCH_META` (missing). Anything else is 17276; `JS_SCOPE`, `IS_MR` and
//! `USER_ROLES` are not available here (51144). Names are checked first (16866-16868).
//!
//! `$let: {vars: {...}, in: ...}` (16874-16877, 10065) parses its values in the outer scope,
//! then `in` with its variables, each given the next slot on the stack.

use bson::raw::RawBsonRef;

use super::expr::{descend, error, parse_field_path, Expr};
use super::path::{bson_error, FieldPath};
use crate::variables::{check_user_read_name, check_user_write_name, Variables};
use crate::{ErrorCode, MongoError};

/// What an expression being parsed can name.
pub(crate) struct Scope<'v> {
    vars: &'v Variables,
    /// `$let` variables in scope; a variable's slot on the evaluation stack is its index.
    locals: Vec<String>,
}

/// System variables mongod has that this server never binds.
const UNAVAILABLE: &[&str] = &["JS_SCOPE", "IS_MR", "USER_ROLES"];

impl<'v> Scope<'v> {
    pub(crate) fn new(vars: &'v Variables) -> Scope<'v> {
        Scope {
            vars,
            locals: Vec::new(),
        }
    }

    /// The collation the command's comparisons use (`None`: simple).
    pub(crate) fn collation(&self) -> Option<&'v std::sync::Arc<crate::collation::Collation>> {
        self.vars.collation()
    }

    /// `"$" + path`: a path in `$$CURRENT`.
    pub(crate) fn field_path(&self, path: &str) -> Result<Expr, MongoError> {
        if path.is_empty() {
            return parse_field_path(path);
        }
        self.resolve("CURRENT", Some(path))
    }

    /// `"$$" + rest`: a variable, with an optional path into it.
    pub(crate) fn variable(&self, rest: &str) -> Result<Expr, MongoError> {
        let (name, path) = match rest.split_once('.') {
            Some((name, path)) => (name, Some(path)),
            None => (rest, None),
        };
        check_user_read_name(name)?;
        self.resolve(name, path)
    }

    fn resolve(&self, name: &str, path: Option<&str>) -> Result<Expr, MongoError> {
        if let Some(slot) = self.locals.iter().rposition(|n| n == name) {
            let path = path.map(checked_path).transpose()?;
            return Ok(Expr::Local { slot, path });
        }
        if let Some(value) = self.vars.user(name) {
            return constant(value.map(|v| v.as_raw_bson_ref()), path);
        }
        match name {
            "ROOT" | "CURRENT" => match path {
                None => Ok(Expr::Root),
                Some(path) => parse_field_path(path),
            },
            "REMOVE" | "SEARCH_META" => Ok(Expr::Remove),
            "NOW" => constant(Some(RawBsonRef::DateTime(self.vars.now())), path),
            "CLUSTER_TIME" => constant(Some(RawBsonRef::Timestamp(self.vars.cluster_time())), path),
            _ if UNAVAILABLE.contains(&name) => Err(error(
                ErrorCode::Location51144,
                format!("Builtin variable '$${name}' is not available"),
            )),
            _ => Err(error(
                ErrorCode::Location17276,
                format!("Use of undefined variable: {name}"),
            )),
        }
    }

    /// Runs `f` with `names` in scope as the next slots (`$map`, `$filter`, `$reduce`).
    pub(crate) fn with_locals<T>(&mut self, names: &[&str], f: impl FnOnce(&mut Self) -> T) -> T {
        let depth = self.locals.len();
        self.locals.extend(names.iter().map(|n| (*n).to_owned()));
        let out = f(self);
        self.locals.truncate(depth);
        out
    }

    /// `$let: {vars: {name: expr, ...}, in: expr}`.
    pub(crate) fn parse_let(&mut self, arg: RawBsonRef<'_>) -> Result<Expr, MongoError> {
        let RawBsonRef::Document(args) = arg else {
            return Err(error(
                ErrorCode::Location16874,
                "$let only supports an object as its argument",
            ));
        };
        let (mut vars, mut body) = (None, None);
        for item in args.iter() {
            let (key, value) = item.map_err(bson_error)?;
            match key {
                "vars" => vars = Some(value),
                "in" => body = Some(value),
                other => {
                    return Err(error(
                        ErrorCode::Location16875,
                        format!("Unrecognized parameter to $let: {other}"),
                    ))
                }
            }
        }
        let vars = vars
            .ok_or_else(|| error(ErrorCode::Location16876, "Missing 'vars' parameter to $let"))?;
        let body =
            body.ok_or_else(|| error(ErrorCode::Location16877, "Missing 'in' parameter to $let"))?;
        let RawBsonRef::Document(vars) = vars else {
            return Err(error(
                ErrorCode::Location10065,
                "invalid parameter: expected an object (vars)",
            ));
        };
        let mut names = Vec::new();
        let mut values = Vec::new();
        for item in vars.iter() {
            let (name, value) = item.map_err(bson_error)?;
            values.push(Expr::parse_scoped(value, self)?);
            names.push(name);
        }
        for name in &names {
            check_user_write_name(name)?;
        }
        let depth = self.locals.len();
        self.locals.extend(names.iter().map(|n| (*n).to_owned()));
        let body = Expr::parse_scoped(body, self);
        self.locals.truncate(depth);
        Ok(Expr::Let {
            values,
            body: Box::new(body?),
        })
    }
}

/// A path after a variable name: no empty component at the end (`"$$x."`).
fn checked_path(path: &str) -> Result<FieldPath, MongoError> {
    match parse_field_path(path)? {
        Expr::Field(p) => Ok(p),
        _ => unreachable!("parse_field_path gives a field path"),
    }
}

/// The constant a command variable (with `path` into it) stands for: its value, or
/// `$$REMOVE` when missing.
fn constant(value: Option<RawBsonRef<'_>>, path: Option<&str>) -> Result<Expr, MongoError> {
    let Some(value) = value else {
        return Ok(Expr::Remove);
    };
    let found = match path {
        None => Some(value.to_raw_bson()),
        Some(path) => {
            let path = checked_path(path)?;
            descend(value, &path, 0)?.as_raw().map(|v| v.to_raw_bson())
        }
    };
    Ok(found.map_or(Expr::Remove, Expr::Literal))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::raw::RawDocumentBuf;
    use bson::{bson, doc, Bson, DateTime, Document, Timestamp};

    /// A document holding only `value`.
    fn holder(value: Bson) -> RawDocumentBuf {
        RawDocumentBuf::from_document(&doc! {"v": value}).expect("encodes")
    }

    fn vars() -> Variables {
        let base = Variables::at(
            DateTime::from_millis(1_000),
            Timestamp {
                time: 7,
                increment: 3,
            },
        );
        let spec = RawDocumentBuf::from_document(&doc! {"x": 5, "d": {"a": [{"b": 1}, {"b": 2}]}})
            .expect("encodes");
        base.with_let(&spec).expect("binds")
    }

    fn eval_in(expression: Bson, document: Document) -> Result<Option<Bson>, MongoError> {
        let spec = holder(expression);
        let e = Expr::parse_in(spec.get("v").expect("valid").expect("present"), &vars())?;
        let d = RawDocumentBuf::from_document(&document).expect("encodes");
        let v = e.evaluate(&d)?;
        Ok(v.as_raw()
            .map(|r| Bson::try_from(r.to_raw_bson()).expect("converts")))
    }

    fn eval(expression: Bson, document: Document) -> Option<Bson> {
        eval_in(expression, document).expect("evaluates")
    }

    fn code(expression: Bson) -> i32 {
        eval_in(expression, doc! {}).unwrap_err().code.code()
    }

    #[test]
    fn command_and_system_variables() {
        assert_eq!(eval(bson!("$$x"), doc! {}), Some(Bson::Int32(5)));
        assert_eq!(eval(bson!("$$d.a.b"), doc! {}), Some(bson!([1, 2])));
        assert_eq!(eval(bson!("$$d.nope"), doc! {}), None);
        assert_eq!(
            eval(bson!("$$NOW"), doc! {}),
            Some(Bson::DateTime(DateTime::from_millis(1_000)))
        );
        assert_eq!(
            eval(bson!("$$CLUSTER_TIME"), doc! {}),
            Some(Bson::Timestamp(Timestamp {
                time: 7,
                increment: 3
            }))
        );
        assert_eq!(eval(bson!("$$SEARCH_META"), doc! {}), None);
        assert_eq!(
            eval(bson!("$$CURRENT.a"), doc! {"a": 2}),
            Some(Bson::Int32(2))
        );
        assert_eq!(code(bson!("$$nope")), 17276);
        assert_eq!(code(bson!("$$_x")), 16867);
        assert_eq!(code(bson!("$$")), 16866);
        assert_eq!(code(bson!("$$a-b")), 16868);
        assert_eq!(code(bson!("$$USER_ROLES")), 51144);
    }

    #[test]
    fn let_binds_per_document_and_shadows() {
        let d = doc! {"price": 10, "qty": 3};
        let total = bson!({"$let": {
            "vars": {"total": {"$multiply": ["$price", "$qty"]}, "x": 1},
            "in": {"$add": ["$$total", "$$x"]}
        }});
        assert_eq!(eval(total, d.clone()), Some(Bson::Int32(31)));
        // The inner `x` hides the outer `$let`'s, which hides the command's.
        let nested = bson!({"$let": {"vars": {"x": 2}, "in": [
            "$$x",
            {"$let": {"vars": {"x": 3, "y": "$$x"}, "in": ["$$x", "$$y"]}},
            "$$x"
        ]}});
        assert_eq!(eval(nested, doc! {}), Some(bson!([2, [3, 2], 2])));
        assert_eq!(eval(bson!("$$x"), doc! {}), Some(Bson::Int32(5)));
        // Paths into a local, and CURRENT rebound.
        let path = bson!({"$let": {"vars": {"o": {"a": {"b": "$price"}}}, "in": "$$o.a.b"}});
        assert_eq!(eval(path, d.clone()), Some(Bson::Int32(10)));
        let current = bson!({"$let": {"vars": {"CURRENT": "$inner"}, "in": ["$v", "$$ROOT.v"]}});
        assert_eq!(
            eval(current, doc! {"v": 1, "inner": {"v": 2}}),
            Some(bson!([2, 1]))
        );
        let removed = bson!({"$let": {"vars": {"m": "$missing"}, "in": {"a": "$$m"}}});
        assert_eq!(eval(removed, d), Some(bson!({})));
    }

    #[test]
    fn let_parse_errors() {
        assert_eq!(code(bson!({"$let": 1})), 16874);
        assert_eq!(code(bson!({"$let": {"vars": {}, "in": 1, "z": 1}})), 16875);
        assert_eq!(code(bson!({"$let": {"in": 1}})), 16876);
        assert_eq!(code(bson!({"$let": {"vars": {}}})), 16877);
        assert_eq!(code(bson!({"$let": {"vars": 1, "in": 1}})), 10065);
        assert_eq!(code(bson!({"$let": {"vars": {"Bad": 1}, "in": 1}})), 16867);
        assert_eq!(code(bson!({"$let": {"vars": {"NOW": 1}, "in": 1}})), 16867);
        // A variable is not visible in its own $let's values.
        assert_eq!(
            code(bson!({"$let": {"vars": {"a": 1, "b": "$$a"}, "in": 1}})),
            17276
        );
        assert_eq!(
            code(bson!({"$let": {"vars": {"a": 1}, "in": "$$b"}})),
            17276
        );
    }
}
