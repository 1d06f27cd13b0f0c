DROP VIEW pgcheckpoint.checkpoint_info;
