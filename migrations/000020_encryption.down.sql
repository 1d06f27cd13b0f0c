-- Dropping the data keys erases every encrypted thread's content for good.
DROP TABLE IF EXISTS pgcheckpoint.data_keys;
