//! MongoDB's error codes and their `codeName`s, in one table: each code appears once, with
//! its number, and its name is its variant's name (mongod names codes it has no name for
//! `Location<N>`, and so do we). Codes follow MongoDB 7.0's `error_codes.yml`. The error
//! value built from a code is in `mongo_error.rs`; this file never formats messages.

/// Declares `ErrorCode` with one variant per `Name = number` row, and its `code()` and
/// `name()`.
macro_rules! error_codes {
    ($($(#[$doc:meta])* $variant:ident = $code:literal,)*) => {
        /// A MongoDB error code with its canonical name.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        #[allow(
            missing_docs,
            reason = "each variant is MongoDB's code of that name (error_codes.yml), which says what it means"
        )]
        pub enum ErrorCode {
            $($(#[$doc])* $variant,)*
        }

        impl ErrorCode {
            /// Every code in the table, in table order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// Numeric code as sent in `code`.
            pub fn code(self) -> i32 {
                match self {
                    $(ErrorCode::$variant => $code,)*
                }
            }

            /// The code with this number, if the table has it.
            pub fn from_code(code: i32) -> Option<ErrorCode> {
                match code {
                    $($code => Some(ErrorCode::$variant),)*
                    _ => None,
                }
            }

            /// Canonical name as sent in `codeName`.
            pub fn name(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => stringify!($variant),)*
                }
            }
        }
    };
}

error_codes! {
    InternalError = 1,
    BadValue = 2,
    HostUnreachable = 6,
    HostNotFound = 7,
    UnknownError = 8,
    NoSuchKey = 4,
    FailedToParse = 9,
    TypeMismatch = 14,
    InvalidLength = 16,
    NamespaceNotFound = 26,
    CursorNotFound = 43,
    /// A tailable cursor's position in a capped collection (the oplog) was deleted.
    CappedPositionLost = 136,
    StaleShardVersion = 63,
    FailedToSatisfyReadPreference = 133,
    StaleEpoch = 150,
    RetryChangeStream = 234,
    StaleConfig = 13388,
    /// A change stream that asked for a pre- or post-image it cannot have (`required`).
    NoMatchingDocument = 47,
    /// A resume token a change stream cannot resume from.
    InvalidResumeToken = 260,
    /// A change stream cannot go on (its resume token was not found, or a later stage
    /// changed an event's `_id`).
    ChangeStreamFatalError = 280,
    /// A change stream's resume point is older than the oplog's oldest entry.
    ChangeStreamHistoryLost = 286,
    /// `$changeStream` on a server that is not a replica-set member.
    Location40573 = 40573,
    /// `$changeStream` given something other than a document.
    Location50808 = 50808,
    /// `$changeStream` given both `resumeAfter` and `startAfter`.
    Location50865 = 50865,
    /// `$changeStream` given a resume token and `startAtOperationTime`.
    Location40674 = 40674,
    CommandNotFound = 59,
    InvalidNamespace = 73,
    NamespaceExists = 48,
    IndexNotFound = 27,
    WriteConflict = 112,
    TransactionTooLargeForCache = 388,
    /// A transaction's one `applyOps` oplog entry would pass the 16 MiB document limit
    /// (mongod 4.0's answer; 4.2+ splits it into a `partialTxn` chain, not built here).
    TransactionTooLarge = 257,
    InvalidOptions = 72,
    DuplicateKey = 11000,
    UnsupportedFormat = 12,
    /// An `authenticationRestrictions` document with neither `clientSource` nor
    /// `serverAddress` (mongod's code for it).
    CollectionIsEmpty = 162,
    UserNotFound = 11,
    Unauthorized = 13,
    ProtocolError = 17,
    AuthenticationFailed = 18,
    RoleNotFound = 31,
    MechanismUnavailable = 334,
    /// createUser: the user already exists.
    Location51003 = 51003,
    /// createRole: the role already exists.
    Location51002 = 51002,
    /// A role change mongod refuses: a cycle, a role granted to itself, privileges or roles
    /// of another database on a role outside `admin`.
    InvalidRoleModification = 49,
    BSONObjectTooLarge = 10334,
    DataCorruptionDetected = 301,
    /// Another process holds the data directory's lock (mongod's `DBPathInUse`).
    DBPathInUse = 98,
    // Network, shutdown and replication-state codes: drivers retry writes that fail with
    // them (the retryable writes spec), and `failCommand` injects them.
    MaxTimeMSExpired = 50,
    WriteConcernFailed = 64,
    NetworkTimeout = 89,
    ShutdownInProgress = 91,
    PrimarySteppedDown = 189,
    // Replica-set mode (`--replSet`, `crates/server/src/repl/`).
    AlreadyInitialized = 23,
    NodeNotFound = 74,
    NoReplicationEnabled = 76,
    NotAReplicaSet = 123,
    UnknownReplWriteConcern = 79,
    InvalidReplicaSetConfig = 93,
    NotYetInitialized = 94,
    UnsatisfiableWriteConcern = 100,
    NewReplicaSetConfigurationIncompatible = 103,
    ClusterTimeFailsRateLimiter = 205,
    ExceededTimeLimit = 262,
    /// A request refused because the memory held by requests in flight is at its cap.
    ExceededMemoryLimit = 146,
    FailPointSetFailed = 266,
    SocketException = 9001,
    NotWritablePrimary = 10107,
    InterruptedAtShutdown = 11600,
    Interrupted = 11601,
    InterruptedDueToReplStateChange = 11602,
    NotPrimaryNoSecondaryOk = 13435,
    NotPrimaryOrSecondary = 13436,
    OutOfDiskSpace = 14031,
    Location50985 = 50985,
    IncompleteTransactionHistory = 217,
    Location50768 = 50768,
    // Multi-document transaction codes (server transactions).
    ConflictingOperationInProgress = 117,
    CommandFailed = 125,
    TransactionTooOld = 225,
    NoSuchTransaction = 251,
    /// The session table holds `maxSessions` sessions already.
    TooManyLogicalSessions = 261,
    TransactionCommitted = 256,
    /// A prepared transaction holds the data (sharded two-phase commit on mongod; this server
    /// never prepares, but `failCommand` injects it and drivers retry on it).
    PreparedTransactionInProgress = 267,
    OperationNotSupportedInTransaction = 263,
    LockTimeout = 24,
    SnapshotTooOld = 239,
    SnapshotUnavailable = 246,
    // Catalog, index and write codes (shale-db).
    InvalidIdField = 53,
    IndexOptionsConflict = 85,
    IndexKeySpecsConflict = 86,
    IndexBuildAborted = 276,
    DocumentValidationFailure = 121,
    CannotCreateIndex = 67,
    IndexAlreadyExists = 68,
    CannotIndexParallelArrays = 171,
    QueryPlanKilled = 175,
    OperationFailed = 96,
    IllegalOperation = 20,
    Overflow = 15,
    InvalidIndexSpecificationOption = 197,
    NoQueryExecutionPlans = 291,
    QueryExceededMemoryLimitNoDiskUseAllowed = 292,
    CommandNotSupported = 115,
    CollectionUUIDMismatch = 361,
    APIVersionError = 322,
    APIStrictError = 323,
    APIDeprecationError = 324,
    Location4886600 = 4886600,
    Location40414 = 40414,
    Location40602 = 40602,
    Location7182500 = 7182500,
    Location7182502 = 7182502,
    Location7182800 = 7182800,
    Location7182802 = 7182802,
    Location50736 = 50736,
    Location50001 = 50001,
    Location51198 = 51198,
    Location50737 = 50737,
    Location50738 = 50738,
    Location40415 = 40415,
    /// A command field given twice (mongod's IDL parsers).
    Location40413 = 40413,
    /// `killOp`'s opid does not fit in 32 bits.
    Location26823 = 26823,
    // Update operator codes (update/).
    PathNotViable = 28,
    ConflictingUpdateOperators = 40,
    DollarPrefixedFieldName = 52,
    NotSingleValueField = 54,
    EmptyFieldName = 56,
    ImmutableField = 66,
    NotImplemented = 238,
    // Matcher, projection and expression codes (query operators and find projection).
    InvalidBSON = 22,
    InvalidPipelineOperator = 168,
    QueryFeatureNotAllowed = 224,
    Location15983 = 15983,
    Location16007 = 16007,
    Location16020 = 16020,
    Location16410 = 16410,
    Location16554 = 16554,
    Location16555 = 16555,
    Location16612 = 16612,
    Location16556 = 16556,
    Location16608 = 16608,
    Location16609 = 16609,
    Location16610 = 16610,
    Location16611 = 16611,
    Location16702 = 16702,
    Location16872 = 16872,
    Location17080 = 17080,
    Location17081 = 17081,
    Location17082 = 17082,
    Location17083 = 17083,
    Location17124 = 17124,
    Location17276 = 17276,
    Location28689 = 28689,
    Location28690 = 28690,
    Location28691 = 28691,
    Location28745 = 28745,
    Location28746 = 28746,
    Location28747 = 28747,
    Location28748 = 28748,
    Location28749 = 28749,
    Location28765 = 28765,
    Location31249 = 31249,
    Location31250 = 31250,
    Location31252 = 31252,
    Location31255 = 31255,
    Location31257 = 31257,
    Location31258 = 31258,
    Location31259 = 31259,
    Location31271 = 31271,
    Location31272 = 31272,
    Location31273 = 31273,
    Location31274 = 31274,
    Location31287 = 31287,
    Location31308 = 31308,
    Location31325 = 31325,
    Location31441 = 31441,
    Location31253 = 31253,
    Location31254 = 31254,
    Location31256 = 31256,
    Location31275 = 31275,
    Location31276 = 31276,
    Location31310 = 31310,
    Location34471 = 34471,
    Location40081 = 40081,
    Location51074 = 51074,
    Location51075 = 51075,
    Location51091 = 51091,
    Location51108 = 51108,
    Location51109 = 51109,
    Location51246 = 51246,
    Location51270 = 51270,
    Location1257300 = 1257300,
    /// A unique hashed index ("Currently hashed indexes cannot guarantee uniqueness").
    Location16764 = 16764,
    /// An array where a hashed index keys its field.
    Location16766 = 16766,
    /// More than one hashed field in an index key pattern.
    Location31303 = 31303,
    // String, regex and conversion expression codes (matcher/expr_strings.rs, expr_regex.rs,
    // expr_convert.rs).
    /// A `$convert` that cannot convert its input (what `onError` replaces).
    ConversionFailure = 241,
    Location16034 = 16034,
    Location16035 = 16035,
    Location18537 = 18537,
    Location28656 = 28656,
    Location28657 = 28657,
    Location28667 = 28667,
    Location31022 = 31022,
    Location31023 = 31023,
    Location31024 = 31024,
    Location34450 = 34450,
    Location34451 = 34451,
    Location34452 = 34452,
    Location34453 = 34453,
    Location34454 = 34454,
    Location34455 = 34455,
    Location34473 = 34473,
    Location40085 = 40085,
    Location40086 = 40086,
    Location40087 = 40087,
    Location40091 = 40091,
    Location40092 = 40092,
    Location40093 = 40093,
    Location40094 = 40094,
    Location40096 = 40096,
    Location40097 = 40097,
    Location50694 = 50694,
    Location50695 = 50695,
    Location50696 = 50696,
    Location50699 = 50699,
    Location50700 = 50700,
    Location50723 = 50723,
    Location50752 = 50752,
    Location51103 = 51103,
    Location51104 = 51104,
    Location51105 = 51105,
    Location51106 = 51106,
    Location51107 = 51107,
    Location51110 = 51110,
    Location51111 = 51111,
    Location51156 = 51156,
    Location51744 = 51744,
    Location51745 = 51745,
    Location51746 = 51746,
    Location51747 = 51747,
    Location51748 = 51748,
    Location51749 = 51749,
    Location51750 = 51750,
    Location51751 = 51751,
    // Date expressions (`matcher/expr_date*.rs`): `$year`..., `$dateToString`, `$dateFromString`,
    // `$dateToParts`, `$dateFromParts`, `$dateAdd`/`$dateSubtract`, `$dateDiff`, `$dateTrunc`.
    Location16006 = 16006,
    Location40533 = 40533,
    Location40535 = 40535,
    Location40539 = 40539,
    Location40536 = 40536,
    Location40517 = 40517,
    Location40485 = 40485,
    Location40519 = 40519,
    Location40518 = 40518,
    Location40516 = 40516,
    Location40489 = 40489,
    Location40525 = 40525,
    Location40515 = 40515,
    Location31034 = 31034,
    Location40523 = 40523,
    Location31095 = 31095,
    Location40540 = 40540,
    Location40541 = 40541,
    Location40542 = 40542,
    Location40684 = 40684,
    Location40524 = 40524,
    Location40520 = 40520,
    Location40522 = 40522,
    Location40521 = 40521,
    Location18629 = 18629,
    Location18534 = 18534,
    Location18628 = 18628,
    Location18533 = 18533,
    Location18535 = 18535,
    Location18536 = 18536,
    Location5166301 = 5166301,
    Location5166302 = 5166302,
    Location5166303 = 5166303,
    Location5166304 = 5166304,
    Location5166305 = 5166305,
    Location5166307 = 5166307,
    Location5166308 = 5166308,
    Location5439013 = 5439013,
    Location5439014 = 5439014,
    Location5439015 = 5439015,
    Location5439016 = 5439016,
    Location5166400 = 5166400,
    Location5166401 = 5166401,
    Location5166402 = 5166402,
    Location5166403 = 5166403,
    Location5166404 = 5166404,
    Location5166405 = 5166405,
    Location5166406 = 5166406,
    Location5976500 = 5976500,
    Location6045000 = 6045000,
    Location5439007 = 5439007,
    Location5439008 = 5439008,
    Location5439009 = 5439009,
    Location5439010 = 5439010,
    Location5439012 = 5439012,
    Location5439017 = 5439017,
    Location5439018 = 5439018,
    Location5439002 = 5439002,
    Location5439006 = 5439006,
    Location5439000 = 5439000,
    Location5439001 = 5439001,
    Location5439004 = 5439004,
    Location5439005 = 5439005,
    // Math, trigonometry and ranged-arity expressions (`matcher/expr_math.rs`, `expr_trig.rs`).
    Location28714 = 28714,
    Location28766 = 28766,
    Location28756 = 28756,
    Location28757 = 28757,
    Location28758 = 28758,
    Location28759 = 28759,
    Location28761 = 28761,
    Location28762 = 28762,
    Location28763 = 28763,
    Location28764 = 28764,
    Location51080 = 51080,
    Location51081 = 51081,
    Location51082 = 51082,
    Location51083 = 51083,
    Location50989 = 50989,
    Location51044 = 51044,
    Location51045 = 51045,
    // Set expressions (`matcher/expr_sets.rs`).
    Location17040 = 17040,
    Location17041 = 17041,
    Location17048 = 17048,
    Location17049 = 17049,
    Location17045 = 17045,
    Location17044 = 17044,
    Location17047 = 17047,
    Location17046 = 17046,
    Location17042 = 17042,
    Location17043 = 17043,
    // Array expressions (`matcher/expr_array_more.rs`, `expr_array_forms.rs`).
    Location40386 = 40386,
    Location40398 = 40398,
    Location40396 = 40396,
    Location40397 = 40397,
    Location40395 = 40395,
    Location4940400 = 4940400,
    Location40391 = 40391,
    Location40392 = 40392,
    Location40393 = 40393,
    Location40394 = 40394,
    Location4940401 = 4940401,
    Location40090 = 40090,
    Location34443 = 34443,
    Location34444 = 34444,
    Location34445 = 34445,
    Location34446 = 34446,
    Location34447 = 34447,
    Location34448 = 34448,
    Location34449 = 34449,
    Location28724 = 28724,
    Location28725 = 28725,
    Location28726 = 28726,
    Location28727 = 28727,
    Location28728 = 28728,
    Location28729 = 28729,
    Location34460 = 34460,
    Location34461 = 34461,
    Location34462 = 34462,
    Location34463 = 34463,
    Location34464 = 34464,
    Location34465 = 34465,
    Location34466 = 34466,
    Location34467 = 34467,
    Location34468 = 34468,
    Location2942500 = 2942500,
    Location2942501 = 2942501,
    Location2942502 = 2942502,
    Location2942503 = 2942503,
    Location2942504 = 2942504,
    Location2942505 = 2942505,
    Location2942506 = 2942506,
    Location2942507 = 2942507,
    Location5787900 = 5787900,
    Location5787801 = 5787801,
    Location5787901 = 5787901,
    Location5787906 = 5787906,
    Location5787907 = 5787907,
    Location5787902 = 5787902,
    Location5787903 = 5787903,
    Location5787908 = 5787908,
    Location5788200 = 5788200,
    // Aggregation pipeline codes (aggregate/).
    Location15947 = 15947,
    Location15952 = 15952,
    Location15955 = 15955,
    Location15958 = 15958,
    Location15959 = 15959,
    Location15969 = 15969,
    Location15973 = 15973,
    Location15974 = 15974,
    Location15975 = 15975,
    Location15976 = 15976,
    Location15981 = 15981,
    Location15998 = 15998,
    Location17312 = 17312,
    Location16412 = 16412,
    Location16866 = 16866,
    Location16867 = 16867,
    Location16868 = 16868,
    Location28808 = 28808,
    Location28809 = 28809,
    Location28810 = 28810,
    Location28811 = 28811,
    Location28812 = 28812,
    Location28818 = 28818,
    Location28822 = 28822,
    Location31002 = 31002,
    Location31119 = 31119,
    Location31120 = 31120,
    Location31324 = 31324,
    Location40060 = 40060,
    Location40061 = 40061,
    Location40062 = 40062,
    Location40063 = 40063,
    Location40064 = 40064,
    Location40065 = 40065,
    Location40066 = 40066,
    Location40067 = 40067,
    Location40068 = 40068,
    Location40191 = 40191,
    Location40192 = 40192,
    Location40193 = 40193,
    Location40194 = 40194,
    Location40195 = 40195,
    Location40196 = 40196,
    Location40197 = 40197,
    Location40198 = 40198,
    Location40199 = 40199,
    Location40200 = 40200,
    Location40201 = 40201,
    Location40202 = 40202,
    Location17053 = 17053,
    Location40099 = 40099,
    Location40100 = 40100,
    Location40101 = 40101,
    Location40102 = 40102,
    Location40103 = 40103,
    Location40104 = 40104,
    Location40105 = 40105,
    Location40185 = 40185,
    Location40271 = 40271,
    Location40239 = 40239,
    Location40240 = 40240,
    Location40241 = 40241,
    Location40242 = 40242,
    Location40243 = 40243,
    Location40244 = 40244,
    Location40245 = 40245,
    Location40246 = 40246,
    Location40257 = 40257,
    Location40258 = 40258,
    Location40259 = 40259,
    Location40260 = 40260,
    Location40261 = 40261,
    Location16878 = 16878,
    Location16879 = 16879,
    Location16880 = 16880,
    Location16881 = 16881,
    Location16882 = 16882,
    Location16883 = 16883,
    Location28646 = 28646,
    Location28647 = 28647,
    Location28648 = 28648,
    Location28649 = 28649,
    Location28650 = 28650,
    Location28651 = 28651,
    Location327391 = 327391,
    Location327392 = 327392,
    Location40075 = 40075,
    Location40076 = 40076,
    Location40077 = 40077,
    Location40078 = 40078,
    Location40079 = 40079,
    Location40080 = 40080,
    Location40400 = 40400,
    Location40390 = 40390,
    Location28664 = 28664,
    Location34435 = 34435,
    Location40147 = 40147,
    Location40148 = 40148,
    Location40149 = 40149,
    Location40156 = 40156,
    Location40157 = 40157,
    Location40158 = 40158,
    Location40160 = 40160,
    Location40169 = 40169,
    Location40170 = 40170,
    Location40171 = 40171,
    Location40176 = 40176,
    Location40177 = 40177,
    Location40181 = 40181,
    Location40183 = 40183,
    Location40228 = 40228,
    Location40229 = 40229,
    Location40230 = 40230,
    Location40231 = 40231,
    Location40234 = 40234,
    Location40235 = 40235,
    Location40236 = 40236,
    Location40237 = 40237,
    Location40238 = 40238,
    Location40272 = 40272,
    Location40323 = 40323,
    Location40324 = 40324,
    Location40352 = 40352,
    Location7749501 = 7749501,
    Location5729100 = 5729100,
    Location40353 = 40353,
    Location40600 = 40600,
    Location51272 = 51272,
    Location5107200 = 5107200,
    Location5107201 = 5107201,
    // Variables (`let`, `$let`, `$$NOW`) and `$getField`/`$setField`/`$unsetField`/`$rand`.
    Location10065 = 10065,
    Location16874 = 16874,
    Location16875 = 16875,
    Location16876 = 16876,
    Location16877 = 16877,
    Location51144 = 51144,
    Location3040500 = 3040500,
    Location3040501 = 3040501,
    Location3041701 = 3041701,
    Location3041702 = 3041702,
    Location3041703 = 3041703,
    Location4161100 = 4161100,
    Location4161101 = 4161101,
    Location4161102 = 4161102,
    Location4161103 = 4161103,
    Location4161105 = 4161105,
    Location4161106 = 4161106,
    Location4161107 = 4161107,
    Location4161108 = 4161108,
    Location4161109 = 4161109,
    Location4738901 = 4738901,
    Location4890500 = 4890500,
    Location5654600 = 5654600,
    Location5654601 = 5654601,
    Location5654602 = 5654602,
    Location9534700 = 9534700,
    // `$out`, `$merge`, `$documents` and views.
    GraphContainsCycle = 5,
    ViewDepthLimitExceeded = 165,
    CommandNotSupportedOnView = 166,
    OptionNotSupportedOnView = 167,
    InvalidViewDefinition = 182,
    MergeStageNoMatchingDocument = 13113,
    Location16990 = 16990,
    Location17152 = 17152,
    Location17385 = 17385,
    Location31319 = 31319,
    Location31320 = 31320,
    Location31321 = 31321,
    Location31465 = 31465,
    Location40601 = 40601,
    Location51047 = 51047,
    Location51132 = 51132,
    Location51134 = 51134,
    Location51178 = 51178,
    Location51181 = 51181,
    Location51182 = 51182,
    Location51183 = 51183,
    Location51185 = 51185,
    Location51186 = 51186,
    Location51187 = 51187,
    Location51191 = 51191,
    Location51199 = 51199,
    Location5858203 = 5858203,
    // Collation documents (`collation/`); `create`'s capped `size`/`max` ranges too.
    Location51024 = 51024,
    // Clustered collections (`create.clusteredIndex`, shale_db::clustered).
    Location5979700 = 5979700,
    Location5979703 = 5979703,
    Location5979704 = 5979704,
    Location5255100 = 5255100,
    Location6026501 = 6026501,
    Location6346401 = 6346401,
    Location6346402 = 6346402,
    Location6367301 = 6367301,
    Location6127800 = 6127800,
    // Queryable Encryption (`create.encryptedFields`, its payloads, compaction; shale_db::qe).
    Location40571 = 40571,
    Location6373501 = 6373501,
    Location6373504 = 6373504,
    Location6373503 = 6373503,
    Location7291501 = 7291501,
    Location7291902 = 7291902,
    Location7291903 = 7291903,
    Location6338401 = 6338401,
    Location6338402 = 6338402,
    Location6338403 = 6338403,
    Location6338404 = 6338404,
    Location6338405 = 6338405,
    Location6338406 = 6338406,
    Location6316402 = 6316402,
    Location6316403 = 6316403,
    Location6412601 = 6412601,
    Location6775205 = 6775205,
    Location6775206 = 6775206,
    Location6775207 = 6775207,
    Location6346807 = 6346807,
    Location6346806 = 6346806,
    Location6346801 = 6346801,
    // `$setWindowFields`, `$fill` and `$densify` (aggregate/window/, fill.rs, densify.rs).
    Location5339900 = 5339900,
    Location5339901 = 5339901,
    Location5339902 = 5339902,
    Location8947401 = 8947401,
    Location5429413 = 5429413,
    Location5429414 = 5429414,
    Location5429513 = 5429513,
    Location5371601 = 5371601,
    Location5371602 = 5371602,
    Location5371603 = 5371603,
    Location605001 = 605001,
    Location6050106 = 6050106,
    Location6307900 = 6307900,
    Location6050200 = 6050200,
    Location6050201 = 6050201,
    Location6050202 = 6050202,
    Location6050203 = 6050203,
    Location6050204 = 6050204,
    Location5788001 = 5788001,
    Location5788002 = 5788002,
    Location5788003 = 5788003,
    Location5788004 = 5788004,
    Location5788005 = 5788005,
    Location5490710 = 5490710,
    Location5624900 = 5624900,
    Location5624901 = 5624901,
    Location5624902 = 5624902,
    Location5624903 = 5624903,
    Location5423900 = 5423900,
    Location5423901 = 5423901,
    Location5423902 = 5423902,
    Location5733401 = 5733401,
    Location5733402 = 5733402,
    Location5733403 = 5733403,
    Location5733404 = 5733404,
    Location5733405 = 5733405,
    Location5733406 = 5733406,
    Location5733408 = 5733408,
    Location5733409 = 5733409,
    Location5733410 = 5733410,
    Location5876900 = 5876900,
    Location5946800 = 5946800,
    Location5946802 = 5946802,
    Location6586400 = 6586400,
    Location5733201 = 5733201,
    Location6053600 = 6053600,
    Location6053601 = 6053601,
    Location5897900 = 5897900,
    Location6371508 = 6371508,
    Location7293205 = 7293205,
    Location7293207 = 7293207,
    Location6666200 = 6666200,
    Location6371506 = 6371506,
}

/// The `codeName` mongod sends for any number: the table's name, else `Location<N>`.
pub fn code_name(code: i32) -> String {
    match ErrorCode::from_code(code) {
        Some(c) => c.name().to_owned(),
        None => format!("Location{code}"),
    }
}

impl ErrorCode {
    /// mongod's `RetriableError` category: a write that failed with one of these may be
    /// retried by the driver (it gets the `RetryableWriteError` label).
    pub fn is_retriable(self) -> bool {
        use ErrorCode::*;
        matches!(
            self,
            HostUnreachable
                | HostNotFound
                | NetworkTimeout
                | ShutdownInProgress
                | PrimarySteppedDown
                | ExceededTimeLimit
                | SocketException
                | NotWritablePrimary
                | InterruptedAtShutdown
                | InterruptedDueToReplStateChange
                | NotPrimaryNoSecondaryOk
                | NotPrimaryOrSecondary
        )
    }

    /// mongod's interruption category: the operation was stopped (`killOp`, a time limit,
    /// shutdown, a replication state change) rather than failing on its own.
    pub fn is_interruption(self) -> bool {
        use ErrorCode::*;
        matches!(
            self,
            Interrupted
                | InterruptedAtShutdown
                | InterruptedDueToReplStateChange
                | MaxTimeMSExpired
                | ExceededTimeLimit
        )
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorCode;
    use super::ErrorCode::*;

    #[test]
    fn codes_match_mongodb() {
        assert_eq!(CommandNotFound.code(), 59);
        assert_eq!(CommandNotFound.name(), "CommandNotFound");
        assert_eq!(DuplicateKey.code(), 11000);
        assert_eq!(WriteConflict.code(), 112);
        assert_eq!(TransactionTooLargeForCache.code(), 388);
        assert_eq!(NamespaceNotFound.code(), 26);
        assert_eq!(CursorNotFound.code(), 43);
        assert_eq!(DataCorruptionDetected.code(), 301);
        assert_eq!(BSONObjectTooLarge.code(), 10334);
        assert_eq!(QueryExceededMemoryLimitNoDiskUseAllowed.code(), 292);
        assert_eq!(Location40324.code(), 40324);
        assert_eq!(Location5107201.name(), "Location5107201");
        assert_eq!(NoSuchTransaction.code(), 251);
        assert_eq!(TransactionCommitted.code(), 256);
        assert_eq!(TransactionTooOld.code(), 225);
        assert_eq!(OperationNotSupportedInTransaction.code(), 263);
        assert_eq!(UnsupportedFormat.code(), 12);
        assert_eq!(CollectionIsEmpty.code(), 162);
        assert_eq!(Location50738.code(), 50738);
        // error_codes.yml: 49 is InvalidRoleModification, 74 NodeNotFound, 5
        // GraphContainsCycle (93 is InvalidReplicaSetConfig).
        assert_eq!(InvalidRoleModification.code(), 49);
        assert_eq!(GraphContainsCycle.code(), 5);
        assert_eq!(NodeNotFound.code(), 74);
        assert_eq!(InvalidReplicaSetConfig.code(), 93);
        assert_eq!(UnsatisfiableWriteConcern.code(), 100);
        assert_eq!(
            OperationNotSupportedInTransaction.name(),
            "OperationNotSupportedInTransaction"
        );
    }

    #[test]
    fn numbers_map_back_to_codes_and_names() {
        assert_eq!(ErrorCode::from_code(91), Some(ShutdownInProgress));
        assert_eq!(ErrorCode::from_code(123_456), None);
        assert_eq!(super::code_name(10107), "NotWritablePrimary");
        assert_eq!(super::code_name(123_456), "Location123456");
        assert!(NotWritablePrimary.is_retriable() && !DuplicateKey.is_retriable());
    }

    #[test]
    fn each_number_is_in_the_table_once() {
        let mut numbers: Vec<i32> = ErrorCode::ALL.iter().map(|c| c.code()).collect();
        numbers.sort_unstable();
        let n = numbers.len();
        numbers.dedup();
        assert_eq!(numbers.len(), n);
    }

    #[test]
    fn location_codes_are_named_by_their_number() {
        for c in ErrorCode::ALL {
            if let Some(digits) = c.name().strip_prefix("Location") {
                assert_eq!(digits.parse::<i32>().ok(), Some(c.code()), "{}", c.name());
            }
        }
    }
}
