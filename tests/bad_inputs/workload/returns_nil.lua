return nil
