#ifndef COURIER_CSQLITESHIM_H
#define COURIER_CSQLITESHIM_H

#include <sqlite3.h>

/*
 * sqlite3_db_config is a variadic C function, which Swift cannot call: the
 * wrapper fixes its arguments to the form every boolean option documents
 * (an int, and where SQLite writes the setting back, here ignored).
 */
int courier_sqlite_db_config_flag(sqlite3 *db, int option, int value);

/*
 * SQLITE_STATIC is a macro for a destructor pointer, which Swift does not
 * import: these bind the caller's bytes where they are, without a copy, so
 * the caller keeps its buffer alive and unchanged until the statement has
 * run and its bindings are cleared.
 */
int courier_sqlite_bind_blob_static(sqlite3_stmt *statement, int index, const void *bytes, int count);
int courier_sqlite_bind_text_static(sqlite3_stmt *statement, int index, const char *text, int count);

/*
 * sqlite3_config is variadic too, and process-wide: called before SQLite
 * is first used, this turns off its memory statistics, which take a
 * mutex on every allocation SQLite makes.
 */
int courier_sqlite_disable_memory_statistics(void);

#endif
